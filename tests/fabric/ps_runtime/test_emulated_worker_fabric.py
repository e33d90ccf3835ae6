"""Emulated workers on the fabric: a real ps-lite job whose bytes cross a rack uplink at
the emulated rate (the worker's pure parts: tests/unit/ps_runtime/test_emulated_worker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ps_runtime.emulated_worker import batch_plan
from ps_runtime.launcher import PSJob, WorkerOptions
from ps_runtime.plan import HostPlan
from ps_runtime.ports import free_port_block as free_base
from sluice_common.jobspec import JobSpec


# ---- on the fabric: real ps-lite bytes across a rack uplink at the emulated rate --------

def _counter(intf: str, name: str) -> int:
    return int(Path(f"/sys/class/net/{intf}/statistics/{name}").read_text())


@pytest.mark.fabric
def test_emulated_job_moves_its_bytes_across_the_rack_uplink_at_the_emulated_rate(tmp_path):
    """PS on h1 (rack 1), two workers on h3 and h4 (rack 2) of two-rack (bw_scale 0.01:
    100 Mbit/s hosts, 50 Mbit/s uplinks). Each batch pushes and pulls resnet18's
    46.8 MB x 0.01 per worker, so both pushes cross tor2's uplink: >= 2 x 0.4676 MB x 8 /
    50 Mbit/s = 150 ms per direction; the uplink's byte counters see every byte."""
    from mininet_fabric.fabric import Fabric
    from ps_runtime.runners import MininetRunner
    from topologies import load_topology

    topo = load_topology("two-rack")
    spec = JobSpec(name="t-emu-fab", model="resnet18", dataset_size=64, epochs=1, batch_size=32,
                   max_gpus=2)
    batches = 6
    with Fabric(topo, progress=False) as fab:
        assert fab.ping_all() == 0.0
        uplink = fab.intf("tor2", "spine1")
        before = _counter(uplink, "tx_bytes") + _counter(uplink, "rx_bytes")
        job = PSJob(spec, HostPlan.on_hosts(topo, ["h1"], ["h3", "h4"]), MininetRunner(fab),
                    tmp_path, batches=batches, base_port=free_base(),
                    options=WorkerOptions(compute="emulated", bw_scale=topo.emulation_bw_scale,
                                          compute_s=0.01))
        with job:
            job.start()
            result = job.wait(timeout=120)
        moved = _counter(uplink, "tx_bytes") + _counter(uplink, "rx_bytes") - before
    wire = batch_plan("resnet18", 32, 0.01).wire_bytes
    # push + pull of both workers, every batch (+ the initial pull), headers on top
    assert moved >= 2 * 2 * batches * wire, (moved, wire)
    assert moved < 2 * 2 * (batches + 2) * wire * 1.3
    comm = sorted(r.comm_s for recs in result.batches.values() for r in recs[1:])
    assert comm[len(comm) // 2] >= 2 * 2 * wire * 8 / 50e6 * 0.9, comm
