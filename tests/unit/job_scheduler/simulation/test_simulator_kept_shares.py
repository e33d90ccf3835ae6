"""What the simulator keeps of each running job between re-timings: its one-way send
share (what the others' round waits and the senders' share read of it) and, with
priority, its figures as a sharer of each uplink it crosses. At every slot each is what
the job's current rate, bandwidth and placement give, as jobs start, share and end."""

from __future__ import annotations

import pytest

from job_scheduler.core.estimator import Estimator
from job_scheduler.core.exchange_pricing import ExchangePricing
from job_scheduler.core.priority_pricing import class_capacity
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


class CheckedLevels(Pinned):
    """Pinned, checking before each slot's starts that every running job's kept uplink
    figures (what the more urgent levels leave it, the flows at its level, the others
    whose send shares its queue waits read) are what the strict-priority model gives
    afresh from the jobs on each uplink and their levels; that the levels stand while
    the uplink's version does (no job crossing it started, stopped or ended its hold);
    and that a new version ranks them afresh."""

    def __init__(self, placements):
        super().__init__(placements)
        self.checked = 0
        self.kept: dict[int, tuple[int, dict]] = {}        # uplink -> (version, levels)
        self.reranked = self.stood = self.steps = 0

    def step(self, sim):
        self.steps += 1
        for j, run in sim.running.items():
            for r, f in run.flows.items():
                table = sim._uplink_levels(r)
                on = sorted(sim.uplink_jobs[r])
                level = table.level
                assert table.on == on and sorted(level) == on
                ver, seen = self.kept.get(r, (None, None))
                if ver == sim._uplink_ver[r]:
                    assert level is seen                    # stands within a version
                    self.stood += 1
                self.kept[r] = (sim._uplink_ver[r], level)
                others = [sim.link_sharer(i, r, level[i]) for i in on
                          if level[i] <= level[j] and i != j and i not in sim._holding]
                want = class_capacity(sim.uplink_cap[r], others, level[j], f)
                mine = table.level[j]
                left = sim._left_at(r, table, mine)
                flows = table.counts.get(mine, 0) + (f if j in sim._holding else 0)
                assert (left, flows) == want
                live = [i for i in sim.uplink_jobs[r] if i not in sim._holding]
                assert [e[0] for e in table.entries] == live == sim._uplink_live(r)
                assert all(e[1] == level[e[0]] and e[2] is sim.running[e[0]]
                           for e in table.entries)
                self.checked += 1
        for r in {r for run in sim.running.values() for r in run.flows} \
                if self.steps % 5 == 0 else ():
            sim._touch({r: 1})                              # a new version: ranked now
            on = sorted(sim.uplink_jobs[r])
            assert sim._uplink_levels(r).level == sim._levels(on)
            self.reranked += 1
        super().step(sim)


@pytest.mark.parametrize("startup", [False, True])
def test_each_uplinks_kept_priority_figures_are_the_models_afresh(startup):
    jobs = [job("a", m=60000), job("b", arrival=40.0, m=20000),
            job("c", arrival=90.0, m=30000), job("d", arrival=95.0, m=5000),
            job("e", arrival=96.0, m=8000)]
    pins = CheckedLevels({"a": CROSS_A, "b": CROSS_B,
                          "c": Placement("c", ("h3",), ("h1",) * 2),
                          "d": Placement("d", ("h4",), ("h2",)),
                          "e": Placement("e", ("h4",), ("h1",))})
    est = Estimator(exchange=ExchangePricing.for_topology(TWO_RACK))
    sim = Simulator(TWO_RACK, jobs, pins, slot=1.0, estimator=est, priority="remaining",
                    startup=startup)
    res = sim.run()
    assert res.jobs == 5 and pins.checked >= 20 and pins.reranked > 0 < pins.stood
    assert min(res.jct) > 0


@pytest.mark.parametrize("priority", [None, "remaining", "aged"])
def test_kept_sums_time_every_job_as_the_senders_summed_afresh(priority, monkeypatch):
    """The round waits from each uplink's kept sums (``SendShares``) and from the list of
    the senders ahead (``ExchangePricing.round_wait_s``) time every job alike."""
    jobs = [job("a", m=60000), job("b", arrival=40.0, m=20000),
            job("c", arrival=90.0, m=30000), job("d", arrival=95.0, m=5000),
            job("e", arrival=96.0, m=8000)]
    pins = {"a": CROSS_A, "b": CROSS_B, "c": Placement("c", ("h3",), ("h1",) * 2),
            "d": Placement("d", ("h4",), ("h2",)), "e": Placement("e", ("h4",), ("h1",))}

    def run():
        est = Estimator(exchange=ExchangePricing.for_topology(TWO_RACK))
        return Simulator(TWO_RACK, jobs, Pinned(pins), slot=1.0, estimator=est,
                         priority=priority).run()
    kept = run()
    monkeypatch.setattr(ExchangePricing, "waits_on_sums", lambda self, in_flight: False)
    listed = run()
    assert kept.jobs == listed.jobs == 5
    assert kept.jct == pytest.approx(listed.jct, rel=1e-9)
    assert kept.avg_jct != pytest.approx(Simulator(
        TWO_RACK, jobs, Pinned(pins), slot=1.0, priority=priority).run().avg_jct, rel=1e-3)


def fresh_used(table, level, send):
    """What the sending jobs more urgent than ``level`` use of the uplink, summed afresh
    in the table's order."""
    got = 0.0
    for i, other, f, nps in table.before(level):
        if send[i] >= 0:
            got += f * other.bw / nps * send[i]
    return got


class TwoPassChecked(Simulator):
    """The simulator, checking at every re-timing that the one pass over a job's uplinks
    gives the bandwidth and round wait of the two passes."""
    checked = 0

    kept_used = 0

    def _priority_timing(self, run):
        got = super()._priority_timing(run)
        tables = {r: self._uplink_levels(r) for r in run.flows}
        assert got == (self._priority_bandwidth(run, tables),
                       self._round_wait(run, tables=tables))
        self.checked += 1
        for table in tables.values():       # the kept use of the more urgent levels
            for level, kept in table._used.items():
                assert kept == fresh_used(table, level, self._send)
                self.kept_used += 1
        return got

    def _fair_timing(self, run):
        got = super()._fair_timing(run)
        assert got == (self.live_bandwidth(run.placement, run.flows, run.base_bw,
                                           joining=False), self._round_wait(run))
        self.checked += 1
        return got


@pytest.mark.parametrize("priority", ["aged", None])
@pytest.mark.parametrize("startup", [False, True])
def test_one_pass_timing_is_the_bandwidth_and_wait_of_two(startup, priority):
    jobs = [job("a", m=60000), job("b", arrival=40.0, m=20000),
            job("c", arrival=90.0, m=30000), job("d", arrival=95.0, m=5000),
            job("e", arrival=96.0, m=8000)]
    pins = Pinned({"a": CROSS_A, "b": CROSS_B, "c": Placement("c", ("h3",), ("h1",) * 2),
                   "d": Placement("d", ("h4",), ("h2",)), "e": Placement("e", ("h4",), ("h1",))})
    est = Estimator(exchange=ExchangePricing.for_topology(TWO_RACK))
    sim = TwoPassChecked(TWO_RACK, jobs, pins, slot=1.0, estimator=est, priority=priority,
                         startup=startup)
    res = sim.run()
    assert res.jobs == 5 and sim.checked >= 20
    assert (sim.kept_used > 0) == (priority is not None)
