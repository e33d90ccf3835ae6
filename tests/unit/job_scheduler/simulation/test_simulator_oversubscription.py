"""The simulator on the oversubscribed cluster-2k fabrics: each rack's pooled uplink is a
half and a quarter of cluster-2k's, while a job alone on the fabric is as fast as on it."""

import pytest

from sluice_common.placement import Placement
from job_scheduler.simulation.simulator import Simulator
from support.sim_jobs import Pinned, job
from topologies import load_topology

CROSS = Placement("a", ("h9",), ("h1", "h2"))  # two flows, rack1 -> rack2
FABRICS = [("cluster-2k", 80_000.0), ("cluster-2k-2to1", 40_000.0),
           ("cluster-2k-4to1", 20_000.0)]


def simulator(name):
    return Simulator(load_topology(name), [job("a")], Pinned({"a": CROSS}), slot=60.0)


@pytest.mark.parametrize("name, capacity", FABRICS)
def test_every_rack_uplink_has_the_fabrics_capacity(name, capacity):
    sim = simulator(name)
    assert sim.uplink_cap == [capacity] * 64


@pytest.mark.parametrize("name, capacity", FABRICS)
def test_a_crowded_uplink_gives_a_flow_its_share_of_that_capacity(name, capacity):
    sim = simulator(name)
    assert sim.base_bandwidth(CROSS) == 5_000.0     # alone: the PS's host link, halved
    sim.uplink_flows[0] = sim.uplink_flows[1] = 30   # 30 other flows on both uplinks
    assert sim.live_bandwidth(CROSS) == pytest.approx(capacity / 32)
