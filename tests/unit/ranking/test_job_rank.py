"""Job-level ranking rules (pure): remaining (SRPT) and attained (MLFQ)."""

import math

import pytest
from hypothesis import given, strategies as st

from sluice_common.job_rank import (JobLoad, attained_bytes, attained_level, attained_levels,
                                 bottleneck_share, progress_levels,
                                 remaining_bytes, remaining_levels)

MB = 1 << 20


def load(job, done, total, bpb, order=0, share=1.0):
    return JobLoad(job, order, done, total, bpb, share)


def test_remaining_bytes_counts_what_is_left_on_the_bottleneck():
    assert remaining_bytes(load("a", 10, 100, MB)) == 90 * MB
    assert remaining_bytes(load("a", 10, 100, MB, share=0.5)) == 45 * MB
    assert remaining_bytes(load("a", 120, 100, MB)) == 0          # overshoot: never negative
    assert remaining_bytes(load("a", 0, None, MB)) == math.inf
    assert remaining_bytes(load("a", 0, 10, None)) == math.inf


def test_remaining_smallest_first_not_batch_count():
    # b has more batches left but tiny batches: fewer bytes left, so it goes first.
    a = load("a", 0, 20, 10 * MB, order=1)       # 200 MB left
    b = load("b", 0, 100, MB, order=2)           # 100 MB left
    c = load("c", 90, 100, 10 * MB, order=3)     # 100 MB left, registered after b
    assert remaining_levels([a, b, c], 8) == {"b": 0, "c": 1, "a": 2}


def test_remaining_re_ranks_as_a_job_progresses():
    a, b = load("a", 0, 100, MB, order=1), load("b", 0, 60, MB, order=2)
    assert remaining_levels([a, b], 8) == {"b": 0, "a": 1}
    a = a._replace(done_batches=50)              # 50 left < 60 left
    assert remaining_levels([a, b], 8) == {"a": 0, "b": 1}


def test_remaining_seven_smallest_get_own_levels_rest_share_the_last():
    jobs = [load(f"j{i}", 0, 10 + i, MB, order=i) for i in range(12)]
    levels = remaining_levels(reversed(jobs), 8)
    assert [levels[f"j{i}"] for i in range(12)] == [0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7]


def test_remaining_unknown_size_goes_last():
    known = load("k", 0, 10 ** 6, MB, order=5)
    unknown = load("u", 0, None, None, order=1)
    assert remaining_levels([unknown, known], 8) == {"k": 0, "u": 1}


def test_attained_levels_are_geometric_thresholds():
    base, f = 4 * MB, 4.0
    assert attained_level(0, 8, base, f) == 0
    assert attained_level(base - 1, 8, base, f) == 0
    assert attained_level(base, 8, base, f) == 1
    assert attained_level(base * f - 1, 8, base, f) == 1
    assert attained_level(base * f, 8, base, f) == 2
    assert attained_level(base * f ** 20, 8, base, f) == 7
    assert attained_level(base * f ** 20, 3, base, f) == 2


def test_attained_ignores_size_and_demotes_with_bytes_sent():
    big_new = load("big", 0, 10 ** 6, MB)
    small_old = load("small", 40, 50, MB)        # 40 MB sent
    levels = attained_levels([big_new, small_old], 8, 4 * MB, 4.0)
    assert levels["big"] == 0 and levels["small"] == 2
    assert attained_bytes(load("x", 3, None, None)) > 0    # unknown bytes still count


def test_attained_rejects_bad_thresholds():
    with pytest.raises(ValueError):
        attained_levels([load("a", 1, 1, 1)], 8, base=0)
    with pytest.raises(ValueError):
        attained_levels([load("a", 1, 1, 1)], 8, factor=1.0)


def test_bottleneck_share():
    assert bottleneck_share(2, 2, 1) == 1.0       # both workers' flows on the uplink
    assert bottleneck_share(1, 2, 1) == 0.5       # one of two workers across the rack
    assert bottleneck_share(2, 2, 2) == 0.5       # one worker's flows to two servers
    with pytest.raises(ValueError):
        bottleneck_share(1, 0, 1)


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(1, 200), st.integers(1, 10 ** 7)),
                min_size=1, max_size=25), st.integers(1, 8))
def test_remaining_levels_are_monotone_in_remaining_bytes(items, n):
    jobs = [load(f"j{i}", d, t, b, order=i) for i, (d, t, b) in enumerate(items)]
    levels = remaining_levels(jobs, n)
    assert set(levels) == {j.job for j in jobs}
    assert all(0 <= lv < n for lv in levels.values())
    for x in jobs:
        for y in jobs:
            if (remaining_bytes(x), x.order) < (remaining_bytes(y), y.order):
                assert levels[x.job] <= levels[y.job]
    assert remaining_levels(list(reversed(jobs)), n) == levels
    # at most one job per level except the last
    used = [lv for lv in levels.values() if lv < n - 1]
    assert len(used) == len(set(used))


@given(st.lists(st.integers(0, 10 ** 5), min_size=1, max_size=20), st.integers(1, 8))
def test_attained_levels_are_monotone_in_attained_bytes(dones, n):
    jobs = [load(f"j{i}", d, None, 64 * 1024, order=i) for i, d in enumerate(dones)]
    levels = attained_levels(jobs, n)
    for x in jobs:
        for y in jobs:
            if attained_bytes(x) <= attained_bytes(y):
                assert levels[x.job] <= levels[y.job]


@given(st.dictionaries(st.sampled_from("abcdefghijklmnop"), st.integers(0, 30), min_size=1),
       st.integers(1, 8))
def test_progress_levels_are_the_controllers_flow_levels_at_job_level(batches, n):
    """One flow per job at the job's batch: the models' progress levels are exactly the
    levels the controller gives those flows (same order, same proportional buckets)."""
    from controller.ranking import PUSH, FlowKey, assign_levels

    flows = [(FlowKey(job, PUSH, "w0", "s0", "10.0.0.1", "10.0.0.2", 9000 + k), b)
             for k, (job, b) in enumerate(sorted(batches.items()))]
    want = {f.job: level for f, level in assign_levels(flows, n).items()}
    assert progress_levels(batches, n) == want


def test_job_levels_dispatches_each_rule_and_refuses_others():
    from sluice_common.rank_rules import job_levels

    loads = [load("a", 0, 100, MB, order=1), load("b", 90, 100, MB, order=2)]
    assert job_levels("remaining", loads, 8) == remaining_levels(loads, 8) == {"b": 0, "a": 1}
    assert job_levels("attained", loads, 8) == attained_levels(loads, 8)
    assert job_levels("progress", loads, 8) == {"a": 0, "b": 1}    # fewer batches done first
    with pytest.raises(ValueError, match="rule must be one of"):
        job_levels("fifo", loads, 8)
