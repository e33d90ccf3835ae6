"""A real PS job across Mininet hosts of the two-rack fabric (server h1, workers h2, h3).

Needs root, Open vSwitch and Mininet (tests/conftest.py fails loudly otherwise); goes
through the fabric harness and its global lock.
"""

from __future__ import annotations

import statistics

import pytest

from sluice_common.jobspec import JobSpec
from mininet_fabric.fabric import Fabric
from ps_runtime.launcher import PSJob, WorkerOptions
from ps_runtime.plan import HostPlan
from ps_runtime.runners import MininetRunner

pytestmark = pytest.mark.fabric

SPEC = JobSpec(name="mn-small", model="smallcnn", dataset_size=4096, epochs=1, batch_size=32,
               max_gpus=2)


def _established(fab: Fabric, host: str) -> list[tuple[str, str]]:
    """(local, peer) address:port pairs of the host's established TCP connections."""
    out = fab.cmd(host, "ss -tnH state established")
    pairs = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4:
            pairs.append((cols[-2], cols[-1]))
    return pairs


def test_ps_job_across_mininet_hosts(tmp_path):
    with Fabric("two-rack", progress=False) as fab:
        placement = HostPlan.on_hosts(fab.topology, ["h1"], ["h2", "h3"])
        job = PSJob(SPEC, placement, MininetRunner(fab), tmp_path, batches=30,
                    options=WorkerOptions(threads=1))
        ends = job.endpoints()
        (server_ip, server_port), = ends["servers"]
        (w0_ip, w0_port), (w1_ip, w1_port) = ends["workers"]
        assert (server_ip, w0_ip, w1_ip) == ("10.0.0.1", "10.0.0.2", "10.0.0.3")
        sockets = {}

        def on_batch(worker, rec):
            if rec.batch == 5 and worker == 0 and not sockets:
                sockets["h1"] = _established(fab, "h1")
                sockets["h3"] = _established(fab, "h3")

        with job:
            job.start()
            result = job.wait(timeout=150, on_batch=on_batch)

    assert set(result.returncodes.values()) == {0}
    for worker in (0, 1):
        losses = [r.loss for r in result.batches[worker]]
        assert len(losses) == 30
        assert statistics.mean(losses[-5:]) < 0.7 * statistics.mean(losses[:5]), losses
    # The flows use exactly the planned endpoints: push to server:PORT from both
    # workers (one of them across the spine), pull responses into worker:PORT.
    h1_peers = {peer.rsplit(":", 1)[0] for local, peer in sockets["h1"]
                if local == f"{server_ip}:{server_port}"}
    assert {w0_ip, w1_ip} <= h1_peers, sockets["h1"]
    assert any(local == f"{w1_ip}:{w1_port}" and peer.startswith(f"{server_ip}:")
               for local, peer in sockets["h3"]), sockets["h3"]
