"""Shared pytest fixtures.

Fabric tests (every test under tests/fabric/, which tests/fabric/conftest.py marks
``fabric``) need root, Open vSwitch and Mininet. They never skip: every test carrying the marker gets the session fixture ``fabric_env``, which FAILS
with a clear message when we are not root or OVS cannot be started (``make test`` sets
both up). Run ``make test-fast`` for the tests that need neither.
"""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("fabric") is not None:
            item.fixturenames.insert(0, "fabric_env")
    if hasattr(config, "workerinput"):
        # a pytest-xdist worker (each collects the same list, in the same order): the slow
        # tests first, so the run does not end waiting on one of them while the other
        # workers are idle
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def fabric_env():
    """Root + Open vSwitch running (started here if needed) + Mininet importable."""
    from mininet_fabric.lock import FabricError
    from mininet_fabric.system import ensure_ovs, require_root

    try:
        require_root()
        ensure_ovs()
        importlib.import_module("mininet.net")
    except (FabricError, ImportError) as err:
        pytest.fail(f"fabric tests need root, Open vSwitch and Mininet (run `make test` as "
                    f"root): {err}", pytrace=False)


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _all_free(base: int, count: int) -> bool:
    for port in range(base, base + count):
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                return False
    return True


@pytest.fixture
def free_port_base():
    """A function ``(count) -> base``: ``count`` consecutive TCP ports, all free now, below
    the kernel's ephemeral range (so no outgoing connection takes one later), for tests
    that start real ps-lite processes on loopback ports from a base. Under pytest-xdist
    each worker searches a band of its own, so two workers never pick one base at once."""
    low_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    band = (low_ephemeral - 20000) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    low, high = 20000 + worker * band, 20000 + (worker + 1) * band

    def pick(count: int) -> int:
        for base in range(low, high - count, count):
            if _all_free(base, count):
                return base
        pytest.fail(f"no {count} free consecutive TCP ports in {low}..{high - 1}", pytrace=False)
    return pick


@pytest.fixture
def normal_controller():
    """The stand-in OpenFlow 1.3 controller (``actions=NORMAL``) on a free loopback port;
    yields ``"127.0.0.1:PORT"``. Loop-free topologies only."""
    port = free_tcp_port()
    proc = subprocess.Popen([sys.executable, "-m", "mininet_tests.normal_controller",
                             "--port", str(port)], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"stand-in controller did not listen on {port}: "
                            f"{proc.stderr.read().decode()[-500:]}")
            time.sleep(0.2)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def slurm_fabric(request, tmp_path_factory):
    """The fabric (two-rack unless the module sets ``SLURM_TOPOLOGY``) under the sluice
    controller, and a real Slurm cluster on it (``end_to_end.slurm_env``): ``.fabric``,
    ``.cluster`` (SlurmCluster: ``.env`` makes any Slurm command work here), ``.topology``,
    ``.controller_api``, ``.admin_token``, ``.ip(host)``. Module-scoped; everything (Slurm
    daemons and their jobs, controller, fabric, namespaces) is torn down after the module,
    also when a test fails. Fails loudly when Slurm is not installed (``make slurm``)."""
    from end_to_end.slurm_env import slurm_environment
    from mininet_fabric.slurm_cluster import missing_binaries

    missing = missing_binaries()
    if missing:
        pytest.fail(f"Slurm tests need Debian's slurmctld slurmd slurm-client munge "
                    f"(`make slurm`); missing: {', '.join(missing)}", pytrace=False)
    topology = getattr(request.module, "SLURM_TOPOLOGY", "two-rack")
    with slurm_environment(topology, tmp_path_factory.mktemp("slurm-fabric")) as env:
        yield env
