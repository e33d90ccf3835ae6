"""The simulator's instruments: the share of running time spent exchanging and the rack
uplinks' utilisation over time (``SimResult.exchange_share``, ``uplink_time``)."""

from __future__ import annotations

import math

import pytest

from job_scheduler.simulation.simulator import UTIL_BINS, Simulator
from topologies import load_topology
from support.sim_jobs import CROSS_A, CROSS_B, Pinned, job

TWO_RACK = load_topology("two-rack")
TOP = UTIL_BINS - 1


def busy_bins(res) -> dict[int, float]:
    return {k: s for k, s in enumerate(res.uplink_time) if s > 0}


def test_a_lone_cross_rack_job_fills_both_uplinks_for_its_exchange_share():
    sim = Simulator(TWO_RACK, [job("a")], Pinned({"a": CROSS_A}), slot=1.0)
    res = sim.run()
    model = sim.models[0]
    share = model.comm(4, 1250.0) / model.C(4, 1250.0)
    assert 0 < share < 1
    assert res.exchange_share == pytest.approx(share)
    # 4 flows of 1,250 Mbit/s each through a 5,000 Mbit/s uplink while exchanging: the
    # uplink's utilisation is the job's exchange share, on both uplinks, for the whole run
    assert busy_bins(res) == {math.ceil(share * TOP): pytest.approx(2 * res.makespan)}


def test_uplink_seconds_cover_every_uplink_for_the_whole_run():
    from sluice_common.placement import Placement

    jobs = [job("a"), job("b", arrival=30.0), job("c", arrival=500.0, max_gpus=1)]
    placements = {"a": CROSS_A, "b": CROSS_B, "c": Placement("c", ("h1",), ("h1",))}
    sim = Simulator(TWO_RACK, jobs, Pinned(placements), slot=1.0)
    res = sim.run()
    assert sum(res.uplink_time) == pytest.approx(len(TWO_RACK.racks) * res.makespan)
    # idle from the last cross-rack job's end while c runs alone on one host
    last_cross = max(sim.finish[k] for k, j in enumerate(sim.jobs) if j.name in "ab")
    assert sim.finish[[j.name for j in sim.jobs].index("c")] > last_cross
    assert res.uplink_time[0] == pytest.approx(2 * (res.makespan - last_cross))
    # three levels: idle, a job alone, a and b together
    assert len(busy_bins(res)) == 3


def test_jobs_in_one_rack_exchange_nothing_over_the_uplinks():
    from sluice_common.placement import Placement

    one_host = Placement("a", ("h1",), ("h1",) * 4)
    res = Simulator(TWO_RACK, [job("a")], Pinned({"a": one_host}), slot=1.0).run()
    assert busy_bins(res) == {0: pytest.approx(2 * res.makespan)}
