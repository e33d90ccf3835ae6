"""What the simulator keeps of each running job between re-timings: its one-way send
share (what the others' round waits and the senders' share read of it) and, with
priority, its figures as a sharer of each uplink it crosses. At every slot each is what
the job's current rate, bandwidth and placement give, as jobs start, share and end."""

from __future__ import annotations

import pytest

from job_scheduler.core.estimator import Estimator
from job_scheduler.core.exchange_pricing import ExchangePricing
from job_scheduler.simulation.simulator import Simulator
from sluice_common.placement import Placement
from support.sim_jobs import CROSS_A, CROSS_B, Pinned, job
from topologies import load_topology

TWO_RACK = load_topology("two-rack")


class Checked(Pinned):
    """Pinned, checking every running job's kept send share before each slot's starts."""

    def __init__(self, placements):
        super().__init__(placements)
        self.checked = 0
        self.sharers = 0

    def step(self, sim):
        for j, run in sim.running.items():
            model = sim.models[j]
            want = min(1.0, model.one_way * model.comm(run.n, run.bw) * run.rate)
            assert run.rate > 0 and sim._send[j] == want
            self.checked += 1
            for r in run.flows:
                kept = sim._sharers.get((j, r))
                if kept is None:
                    continue
                assert kept[0] is run
                fresh = sim.link_sharer(j, r, kept[1].level)
                assert ((kept[1].flows, kept[1].servers, kept[1].base_bw, kept[1].cost_s)
                        == (fresh.flows, fresh.servers, fresh.base_bw, fresh.cost_s))
                assert kept[1].comm_s(800.0) == fresh.comm_s(800.0) > 0
                self.sharers += 1
        super().step(sim)


@pytest.mark.parametrize("options", [{}, {"priority": "remaining"},
                                     {"share": "senders"}])
def test_each_running_jobs_send_share_follows_its_rate(options):
    jobs = [job("a", m=60000), job("b", arrival=40.0, m=20000),
            job("c", arrival=90.0, m=30000), job("d", arrival=95.0, m=5000)]
    pins = Checked({"a": CROSS_A, "b": CROSS_B, "c": Placement("c", ("h3",), ("h1",) * 2),
                    "d": Placement("d", ("h4",), ("h2",))})
    est = Estimator(exchange=ExchangePricing.for_topology(TWO_RACK))
    sim = Simulator(TWO_RACK, jobs, pins, slot=1.0, estimator=est, **options)
    res = sim.run()
    assert res.jobs == 4 and pins.checked > 0
    assert (pins.sharers > 0) == ("priority" in options)
    assert min(res.jct) > 0
