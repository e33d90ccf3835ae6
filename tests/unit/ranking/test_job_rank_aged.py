"""The ``aged`` rule: SRPT whose key rises with the registration time, the bound it puts on
starvation, and the models ranking by it."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings, strategies as st

from mininet_tests import fluid
from sluice_common import job_rank, rank_rules
from sluice_common.job_rank import (AGING_BYTES_PER_S, JobLoad, aged_bytes, overtaking_window_s,
                                    remaining_bytes)
from sluice_common.rank_rules import ORDER, RankRule

MB = 1 << 20

jobs_st = st.lists(st.tuples(st.integers(1, 200),          # total batches
                             st.integers(1, 4),            # MB per batch
                             st.floats(0, 1),              # fraction done
                             st.floats(0, 2000)),          # registered (s)
                   min_size=2, max_size=12)


def _loads(spec) -> list[JobLoad]:
    # registration order follows registration time, as in the controller
    spec = sorted(spec, key=lambda x: x[3])
    return [JobLoad(f"j{i}", i, math.floor(total * done), total, bpb * MB, 1.0, registered_s=reg)
            for i, (total, bpb, done, reg) in enumerate(spec)]


def test_the_default_rule_is_aged_and_remaining_keeps_its_name():
    assert rank_rules.DEFAULT_RULE == "aged"
    assert {"remaining", "aged"} <= set(rank_rules.names())
    assert rank_rules.rule("aged").shape == ORDER


def test_the_key_is_remaining_bytes_plus_the_rate_times_the_registration_time():
    j = JobLoad("a", 0, 3, 10, MB, 0.5, registered_s=100.0)
    assert aged_bytes(j) == remaining_bytes(j) + AGING_BYTES_PER_S * 100.0
    assert aged_bytes(j, per_s=0) == remaining_bytes(j) == 3.5 * MB
    with pytest.raises(ValueError, match="per_s"):
        aged_bytes(j, per_s=-1)


def test_a_later_job_overtakes_only_while_smaller_by_the_rate_times_the_gap():
    early = JobLoad("early", 0, 0, 10, MB, registered_s=0.0)
    gap = 20.0
    margin = AGING_BYTES_PER_S * gap

    def later(size: float) -> JobLoad:
        return JobLoad("late", 1, 0, 1, int(size), registered_s=gap)

    ahead = rank_rules.job_levels("aged", [early, later(10 * MB - margin - 1)], 8)
    behind = rank_rules.job_levels("aged", [early, later(10 * MB - margin + 1)], 8)
    assert ahead == {"late": 0, "early": 1}
    assert behind == {"early": 0, "late": 1}
    # under plain SRPT the second one is ahead too
    assert rank_rules.job_levels("remaining", [early, later(10 * MB - margin + 1)], 8)["late"] == 0


def test_jobs_of_unknown_size_go_last_and_keep_their_registration_order():
    known = JobLoad("known", 2, 0, 1000, 4 * MB, registered_s=5000.0)
    a = JobLoad("a", 0, 0, None, None, registered_s=0.0)
    b = JobLoad("b", 1, 0, None, None, registered_s=10.0)
    assert rank_rules.job_levels("aged", [b, known, a], 8) == {"known": 0, "a": 1, "b": 2}
    assert overtaking_window_s(math.inf) == math.inf


@settings(max_examples=200, deadline=None)
@given(spec=jobs_st, shift=st.floats(-1e6, 1e6))
def test_the_order_does_not_change_as_time_passes(spec, shift):
    """Every key ages alike: moving every registration by the same time (the origin the
    key leaves out) changes no level, so no re-rank is due between events."""
    loads = _loads(spec)
    moved = [j._replace(registered_s=j.registered_s + shift) for j in loads]
    # a shift moves keys by the same amount only up to rounding: keep far from ties
    keys = sorted(aged_bytes(j) for j in loads)
    assume(all(b - a >= 1.0 for a, b in zip(keys, keys[1:])))
    assert rank_rules.job_levels("aged", moved, 8) == rank_rules.job_levels("aged", loads, 8)


@settings(max_examples=200, deadline=None)
@given(spec=jobs_st, extra=st.integers(0, 200))
def test_the_key_never_grows_as_a_job_progresses(spec, extra):
    for j in _loads(spec):
        on = j._replace(done_batches=min(j.total_batches, j.done_batches + extra))
        assert aged_bytes(on) <= aged_bytes(j)


@settings(max_examples=300, deadline=None)
@given(spec=jobs_st, levels=st.integers(1, 8))
def test_starvation_bound_a_later_job_ahead_registered_within_the_window(spec, levels):
    """The bound: a job ranked ahead of an earlier-registered one (a more urgent level, or
    before it in the order) registered less than the earlier job's window after it, and
    was smaller than it by the rate times the gap."""
    loads = _loads(spec)
    level = rank_rules.job_levels("aged", loads, levels)
    key = {j.job: rank_rules.rule("aged").key(j) for j in loads}
    for a in loads:
        window = overtaking_window_s(remaining_bytes(a))
        for b in loads:
            if b.registered_s <= a.registered_s or b.order <= a.order:
                continue
            if level[b.job] < level[a.job] or key[b.job] < key[a.job]:
                gap = b.registered_s - a.registered_s
                assert gap < window
                assert remaining_bytes(b) < remaining_bytes(a) - AGING_BYTES_PER_S * gap + 1e-6


@settings(max_examples=200, deadline=None)
@given(remaining=st.integers(0, 10 ** 12), per_s=st.floats(1, 1e9), after=st.floats(0, 1e4))
def test_no_job_registered_after_the_window_overtakes(remaining, per_s, after):
    """Even a later job with nothing left, registered once the earlier job's window has
    passed, ranks behind it."""
    rule = RankRule("aged-probe", "probe", ORDER,
                    key=lambda j: (aged_bytes(j, per_s), j.order, j.job))
    a = JobLoad("a", 0, 0, 1, remaining, registered_s=0.0)
    # past the window's end (by more than the rounding of the division)
    late = overtaking_window_s(remaining, per_s) * (1 + 1e-12) + after
    b = JobLoad("b", 1, 1, 1, 1, registered_s=late)
    assert rule.job_levels([b, a], 8) == {"a": 0, "b": 1}
    with pytest.raises(ValueError, match="per_s"):
        overtaking_window_s(remaining, 0)


# ------------------------------------------------------------------ in the fluid model --
@pytest.fixture
def strong_aging():
    """``aged`` at 1 MB/s (a window of seconds, so that the model's run stays short)."""
    name = "aged-test-1mbs"
    rank_rules.register(RankRule(name, "aged at 1 MB/s", ORDER,
                                 key=lambda j: (aged_bytes(j, 1e6), j.order, j.job)))
    yield name
    rank_rules.unregister(name)


def _starving_mix(stream_s: float) -> list[fluid.FluidJob]:
    """A job of 10 batches of 1 MB, then a job of one such batch every 0.5 s for
    ``stream_s``: twice what the link carries (each takes 1 s alone), so under SRPT the
    first moves nothing until the stream's backlog is gone."""
    big = fluid.FluidJob("big", 0.0, 10, MB, 2.0)
    small = [fluid.FluidJob(f"s{k:03d}", 0.25 + 0.5 * k, 1, MB, 2.0)
             for k in range(int(stream_s / 0.5))]
    return [big, *small]


def test_in_the_fluid_model_a_stream_of_smaller_jobs_holds_back_a_job_a_bounded_time(
        strong_aging):
    capacity = 1.0 * MB                 # a 1 MB batch both ways: 1 s alone
    jct = {}
    for stream_s in (30.0, 60.0):
        for rule in ("remaining", strong_aging):
            jct[rule, stream_s] = fluid.simulate(_starving_mix(stream_s), rule, capacity,
                                                 dt=0.05)["big"]
    # SRPT: the big job waits for the whole stream and its backlog, however long
    assert jct["remaining", 30.0] > 60.0 and jct["remaining", 60.0] > 120.0
    # aged: only the jobs arriving within its window (10 MB at 1 MB/s) go ahead, then it
    # finishes: its own 10 s and 1 s for each of them, however long the stream
    window = overtaking_window_s(10 * MB, 1e6)
    ahead = sum(1 for j in _starving_mix(30.0)[1:] if j.arrival < window)
    assert jct[strong_aging, 30.0] <= 10.0 + ahead * 1.0 + 0.5
    assert jct[strong_aging, 60.0] == pytest.approx(jct[strong_aging, 30.0], abs=0.1)


def test_the_models_register_a_job_at_its_arrival():
    """The fluid model's levels under aged: a later job must be smaller by the rate times
    the gap between the arrivals."""
    early = fluid.FluidJob("early", 0.0, 10, MB, 2.0)
    gap = 100.0
    margin = AGING_BYTES_PER_S * gap
    late = fluid.FluidJob("late", gap, 1, int(10 * MB - margin) + 1000, 2.0)
    groups = fluid.rank_groups([early, late], "aged", {"early": 0.0, "late": 0.0})
    assert groups == [["early"], ["late"]]
    assert fluid.rank_groups([early, late], "remaining", {"early": 0.0, "late": 0.0}) == \
        [["late"], ["early"]]
    assert job_rank.AGING_BYTES_PER_S > 0
