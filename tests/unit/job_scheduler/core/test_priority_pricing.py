"""Pricing a placement with the fabric's strict priority: the one
strict-priority uplink model (job_scheduler/core/priority_pricing.py), what it gives a
job on top and at the bottom, and that with the rule off it is today's fair share."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from sluice_common.placement import Placement
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.priority_pricing import (LinkSharer, class_capacity, rank_item,
                                                 rank_levels, rule_levels, rule_size,
                                                 sized_load)
from sluice_common import rank_rules
from job_scheduler.service.service_view import ServiceView
from job_scheduler.simulation.simulator import Simulator
from support.sim_jobs import CROSS_A, CROSS_B, Pinned, job
from topologies import load_topology

TWO_RACK = load_topology("two-rack")       # 2 racks x 2 hosts x 4 GPUs, 5,000 Mbit/s uplinks
UPLINK = 5000.0
# the candidate: its PS in rack 2, two workers in rack 1 (2 flows over both uplinks)
SMALL_CROSS = Placement("c", ("h3",), ("h1", "h1"))


def sharer(level: int, flows: int = 1, servers: int = 1, base: float = 1e9,
           unit: float = 100.0, cost: float = 10.0) -> LinkSharer:
    """A sharer whose whole-run communication takes ``unit / bw`` seconds."""
    return LinkSharer(level, flows, servers, base, lambda bw: unit / bw, cost)


sharers = st.lists(st.builds(sharer, level=st.integers(0, 7), flows=st.integers(1, 8),
                             servers=st.integers(1, 3), base=st.floats(10.0, 1e5),
                             unit=st.floats(0.0, 1e6), cost=st.floats(0.1, 1e4)),
                   max_size=8)


@settings(max_examples=60, deadline=None)
@given(others=sharers, flows=st.integers(1, 8), cap=st.floats(100.0, 1e5))
def test_the_top_class_gets_the_whole_link(others, flows, cap):
    """Nobody more urgent: the job's class has the whole uplink, shared with its own
    class only."""
    lower = [LinkSharer(s.level + 1, s.flows, s.servers, s.base_bw, s.comm_s, s.cost_s)
             for s in others]
    assert class_capacity(cap, lower, 0, flows) == (cap, flows)
    same = [s for s in others if s.level == 0]
    assert class_capacity(cap, others, 0, flows) == (cap, flows + sum(s.flows for s in same))


@settings(max_examples=60, deadline=None)
@given(others=sharers, flows=st.integers(1, 8), cap=st.floats(100.0, 1e5))
def test_the_bottom_class_gets_the_residual(others, flows, cap):
    """Below everyone: what every more urgent class uses is taken off the link first,
    level by level (each class's share split among its flows), never below the floor."""
    left, count = class_capacity(cap, others, 8, flows)
    assert count == flows
    expect = cap
    for k in sorted({s.level for s in others}):
        here = [s for s in others if s.level == k]
        share = expect / sum(s.flows for s in here)
        for s in here:
            rate = min(share, s.base_bw / s.servers)
            busy = s.comm_s(rate * s.servers)
            expect -= s.flows * rate * (busy / (s.cost_s + busy) if busy else 0.0)
        expect = max(expect, 1e-9 * cap)
    assert left == pytest.approx(expect, rel=1e-12)
    assert 1e-9 * cap * (1 - 1e-12) <= left <= cap


def _running(jobs, pins, priority=None) -> Simulator:
    """A simulator with the pinned jobs running and the rest waiting (time 0)."""
    sim = Simulator(TWO_RACK, jobs, Pinned(pins), slot=1.0, priority=priority)
    sim.waiting = dict.fromkeys(range(len(jobs)))
    for j, spec in enumerate(sim.jobs):
        if spec.name in pins:
            sim.start(j, pins[spec.name])
    return sim


HOSTS = ("h1", "h2", "h3", "h4")
placements = st.builds(lambda ps, workers: (tuple(ps), tuple(workers)),
                       st.lists(st.sampled_from(HOSTS), min_size=1, max_size=3),
                       st.lists(st.sampled_from(HOSTS), min_size=1, max_size=4))


@settings(max_examples=80, deadline=None)
@given(running=st.lists(placements, max_size=3), cand=placements,
       sizes=st.lists(st.integers(2_000, 200_000), min_size=4, max_size=4))
def test_priority_off_is_the_fair_share_to_the_last_bit(running, cand, sizes):
    """Rule off (None): the price is ``Simulator.live_bandwidth``, today's fair share,
    exactly, for any running jobs on the uplinks and any candidate placement."""
    names = [f"r{i}" for i in range(len(running))] + ["c"]
    jobs = [job(n, m=sizes[i]) for i, n in enumerate(names)]
    pins, used = {}, {h: 0 for h in HOSTS}
    for name, (ps, workers) in zip(names, running):
        if all(used[h] + workers.count(h) <= 4 for h in workers):
            pins[name] = Placement(name, ps, workers)
            for h in workers:
                used[h] += 1
    sim = _running(jobs, pins)
    p = Placement("c", *cand)
    c = len(jobs) - 1
    assert sim.priority_bandwidth(p, c, None) == sim.live_bandwidth(p)


def test_a_job_the_rule_puts_on_top_gets_the_link_the_fair_share_would_split():
    """Two big jobs send 4 flows each over both uplinks; a small job with 2 flows there
    would get 5,000 / 10 per flow as a fair share, but the rule puts it first: it gets
    its bandwidth alone (2 flows on a 5,000 Mbit/s uplink)."""
    jobs = [job("a", m=80_000), job("b", m=80_000), job("c", max_gpus=2, m=2_000)]
    sim = _running(jobs, {"a": CROSS_A, "b": CROSS_B}, priority="remaining")
    fair = sim.live_bandwidth(SMALL_CROSS)
    assert fair == pytest.approx(UPLINK / 10)
    alone = sim.base_bandwidth(SMALL_CROSS)
    assert alone == pytest.approx(UPLINK / 2)
    assert sim.priority_bandwidth(SMALL_CROSS, 2, "remaining") == alone
    # the same uplinks, the job as big as the others: in a class of its own, last
    # (remaining ties keep job order), it gets what a's and b's classes leave
    big = [job("a", m=80_000), job("b", m=80_000), job("c", max_gpus=2, m=80_000)]
    last = _running(big, {"a": CROSS_A, "b": CROSS_B}, priority="remaining")
    got = last.priority_bandwidth(SMALL_CROSS, 2, "remaining")
    left = UPLINK
    for j in (0, 1):                        # a at level 0, b at 1: 4 flows, 1 PS each
        m = last.models[j]
        rate = min(left / 4, last.base_bandwidth(last.placements[j]))
        busy = m.comm(4, rate)
        left -= 4 * rate * busy / (m.cost(4) + busy)
    assert got == pytest.approx(left / 2, rel=1e-12)
    assert got < alone


def test_the_price_is_what_the_simulated_fabric_then_gives():
    """Priced just before it starts, a job runs at that bandwidth once started: the
    pricing and the simulator's world are one model."""
    for size in (2_000, 80_000, 500_000):
        jobs = [job("a", m=80_000), job("b", m=40_000), job("c", max_gpus=2, m=size)]
        sim = _running(jobs, {"a": CROSS_A, "b": CROSS_B}, priority="remaining")
        price = sim.priority_bandwidth(SMALL_CROSS, 2, "remaining")
        sim.start(2, SMALL_CROSS)
        sim._retime(sim.running[2])
        assert sim.running[2].bw == pytest.approx(price, rel=1e-12)


def test_the_service_view_prices_as_the_simulator():
    """The scheduler service's (and sluice run's) view prices with its running jobs on
    the nominal topology's uplinks: the simulator's figure for the same jobs."""
    jobs = [job("a", m=80_000), job("b", m=80_000), job("c", max_gpus=2, m=80_000)]
    sim = _running(jobs, {"a": CROSS_A, "b": CROSS_B}, priority="remaining")
    view = ServiceView(TWO_RACK, sim.estimator, 1.0)
    for j, spec in enumerate(jobs):
        view.add(j, spec)
    view.start(0, Placement("0", CROSS_A.ps_hosts, CROSS_A.worker_hosts))
    view.start(1, Placement("1", CROSS_B.ps_hosts, CROSS_B.worker_hosts))
    for rule in ("remaining", "attained", None):
        want = sim.priority_bandwidth(SMALL_CROSS, 2, rule)
        assert view.priority_bandwidth(SMALL_CROSS, 2, rule) == pytest.approx(want, rel=1e-12)
    assert not math.isinf(want)


@pytest.mark.parametrize("rule", rank_rules.names())
def test_levels_from_kept_rank_items_are_the_rules_own(rule):
    """A loop that keeps each job's rule size and rank item (``rule_size``,
    ``sized_load``, ``rank_item``) ranks as ``rule_levels`` does, ties included."""
    rng = random.Random(5)
    est = Estimator()
    for _ in range(50):
        specs = [job(f"j{k}", m=rng.choice((2000, 20000, 60000)))
                 for k in range(rng.randrange(1, 20))]
        left = [rng.choice((1.0, 0.5, 0.25, rng.random())) for _ in specs]
        want = rule_levels(rule, [(k, s, r) for k, (s, r) in enumerate(zip(specs, left))], est)
        kept = rank_rules.rule(rule)
        items = [rank_item(kept, sized_load(k, *rule_size(s, est), r))
                 for k, (s, r) in enumerate(zip(specs, left))]
        assert rank_levels(kept, items) == want
