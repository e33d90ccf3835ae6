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
from contextlib import ExitStack
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("fabric") is not None:
            item.fixturenames.insert(0, "fabric_env")
    # the modules on one Slurm topology run one after the other (at the place of the
    # first of them), so that they share one bring-up (``slurm_fabric``)
    _GROUPS.clear()
    for item in items:
        if "slurm_fabric" in item.fixturenames:
            _GROUPS[item.path] = ("slurm", getattr(item.module, "SLURM_TOPOLOGY", "two-rack"))
    first: dict[object, int] = {}
    for k, item in enumerate(items):
        first.setdefault(_slurm_group(item), k)
    items[:] = [item for _, _, item in sorted(
        (first[_slurm_group(item)], k, item) for k, item in enumerate(items))]
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


_GROUPS: dict[Path, tuple[str, str]] = {}     # test file -> ("slurm", its topology)


def _slurm_group(item):
    """The Slurm topology a test's module brings up (``slurm_fabric``), else its module."""
    path = getattr(item, "path", None)
    return _GROUPS.get(path) or ("module", str(path))


class SharedSlurm:
    """The one Slurm environment up at a time (``end_to_end.slurm_env``), kept across the
    consecutive modules that bring up the same topology; closed before any other test
    runs (a fabric of its own would find the interfaces and the fabric lock taken) and
    at the end of the session."""

    def __init__(self):
        self.group = None
        self.stack: ExitStack | None = None
        self.env = None

    def get(self, group, out: Path):
        from end_to_end.slurm_env import slurm_environment

        self.close()
        stack = ExitStack()
        self.env = stack.enter_context(slurm_environment(group[1], out))
        self.stack, self.group = stack, group
        return self.env

    def close(self) -> None:
        stack, self.stack, self.group, self.env = self.stack, None, None, None
        if stack is not None:
            stack.close()


_SHARED_SLURM = SharedSlurm()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if _SHARED_SLURM.stack is not None and (nextitem is None
                                            or _slurm_group(nextitem) != _SHARED_SLURM.group):
        _SHARED_SLURM.close()


def pytest_sessionfinish():
    _SHARED_SLURM.close()


@pytest.fixture(scope="module")
def slurm_fabric(request, tmp_path_factory):
    """The fabric (two-rack unless the module sets ``SLURM_TOPOLOGY``) under the sluice
    controller, and a real Slurm cluster on it (``end_to_end.slurm_env``): ``.fabric``,
    ``.cluster`` (SlurmCluster: ``.env`` makes any Slurm command work here), ``.topology``,
    ``.controller_api``, ``.admin_token``, ``.ip(host)``. One bring-up serves the
    consecutive modules of one topology (the collection puts them together); a module
    after the first finds it as a bring-up leaves it (``settled``: no job, every node
    idle), or a fresh one where it cannot be settled. Everything (Slurm daemons and their
    jobs, controller, fabric, namespaces) is torn down after the last of them, also when a
    test fails. Fails loudly when Slurm is not installed (``make slurm``)."""
    from mininet_fabric.slurm_cluster import missing_binaries

    missing = missing_binaries()
    if missing:
        pytest.fail(f"Slurm tests need Debian's slurmctld slurmd slurm-client munge "
                    f"(`make slurm`); missing: {', '.join(missing)}", pytrace=False)
    group = ("slurm", getattr(request.module, "SLURM_TOPOLOGY", "two-rack"))
    if _SHARED_SLURM.group == group:
        try:
            env = settled(_SHARED_SLURM.env)
        except Exception as err:        # e.g. a daemon an earlier test killed is gone
            print(f"slurm_fabric: the shared cluster cannot be settled ({err}); "
                  f"bringing up a fresh one", file=sys.stderr)
            env = None
        if env is not None:
            yield env
            return
    yield _SHARED_SLURM.get(group, tmp_path_factory.mktemp("slurm-fabric"))


def settled(env, timeout: float = 60.0):
    """``env`` as a fresh bring-up leaves it for the next module: no Slurm job left (each
    cancelled), every node resumed and idle."""
    cli_env = {**os.environ, **env.cluster.env}
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env=cli_env, capture_output=True,
                         text=True, timeout=30).stdout.split()
    for jid in sorted({j.split("+")[0] for j in out}):
        subprocess.run(["scancel", jid], env=cli_env, capture_output=True, timeout=30)
    for host in env.cluster.hosts:
        subprocess.run(["scontrol", "update", f"nodename={host}", "state=resume"],
                       env=cli_env, capture_output=True, timeout=30)
    env.cluster.wait_idle(env.cluster.hosts, timeout)
    return env
