"""The report hints (controller/report_hints.py) and the client's gate (ps_runtime/progress.py):
pure functions, checked against the ranking rules they stand for."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from controller.report_hints import Hint, allowance, order_threshold, own_threshold, worker_hint
from ps_runtime.progress import ReportGate
from sluice_common import job_rank, rank_rules
from sluice_common.job_rank import JobLoad


def _load(done, total=1000, bpb=10, order=1, job="a", share=1.0):
    return JobLoad(job, order, done, total, bpb, share)


def _key(j):
    return (job_rank.remaining_bytes(j), j.order, j.job)


def remaining_threshold(load, ahead):
    return order_threshold(load, ahead, rank_rules.rule("remaining").key)


def attained_threshold(load, levels, base, factor):
    return own_threshold(load, levels, base, factor, rank_rules.rule("attained").level_of)


@given(done=st.integers(0, 999), ahead_done=st.integers(0, 1000), ahead_order=st.integers(0, 3))
def test_remaining_threshold_is_the_first_done_count_that_overtakes(done, ahead_done,
                                                                   ahead_order):
    me = _load(done, order=2, job="me")
    ahead = _key(_load(ahead_done, order=ahead_order, job="other"))
    t = remaining_threshold(me, ahead)
    passes = [d for d in range(done + 1, 1001) if _key(me._replace(done_batches=d)) < ahead]
    assert t == (passes[0] if passes else None)


def test_remaining_threshold_none_without_a_size_or_a_job_ahead():
    assert remaining_threshold(_load(3, total=None), (0, 0, "x")) is None
    assert remaining_threshold(_load(3), None) is None


@given(done=st.integers(0, 10 ** 6), bpb=st.integers(1, 10 ** 6), levels=st.integers(1, 8))
@settings(max_examples=200)
def test_attained_threshold_is_the_first_done_count_of_the_next_level(done, bpb, levels):
    base, factor = 4 << 20, 4.0
    me = _load(done, total=None, bpb=bpb)

    def level(d):
        return job_rank.attained_level(d * bpb, levels, base, factor)

    t = attained_threshold(me, levels, base, factor)
    if level(done) == levels - 1:
        assert t is None
    else:
        assert t is not None and t > done and level(t) > level(done) and level(t - 1) == level(done)


@given(gap=st.integers(1, 10 ** 5), workers=st.integers(1, 64), others=st.integers(0, 10 ** 5))
def test_allowances_never_add_up_to_the_gap(gap, workers, others):
    a = allowance(gap, workers, others)
    assert a >= 0
    if others <= gap - 1:
        assert a + others <= gap - 1           # the crossing is always reported
    assert a <= math.ceil(gap / workers)       # a fair share, no more


def test_worker_hint_at_and_before_the_threshold():
    assert worker_hint(5, None, 40, 8, 0, 1.0) == Hint(None, 1.0)
    assert worker_hint(5, 40, 40, 8, 0, None) == Hint(6, None)          # at it already
    # gap 80 over 8 workers: each may advance 9 batches silently, the 10th reports
    assert worker_hint(5, 120, 40, 8, 0, 60.0) == Hint(15, 60.0)
    assert worker_hint(0, 120, 40, 8, 0, 60.0) == Hint(11, 60.0)        # batch 0 adds 0


def test_gate_without_a_hint_keeps_the_old_rate_limit():
    g = ReportGate(min_interval=0.2)
    assert g.wait_s(1, 0.0) == 0.0                     # the first report goes at once
    g.sent_at(1, 0.0, None)
    assert g.wait_s(1, 0.05) is None                   # nothing new
    assert abs(g.wait_s(2, 0.05) - 0.15) < 1e-9
    g.sent_at(2, 0.2, {"result": "accepted"})          # an old controller: no hint
    assert abs(g.wait_s(3, 0.3) - 0.1) < 1e-9


def test_gate_follows_the_hint():
    g = ReportGate(min_interval=0.2)
    g.sent_at(1, 0.0, {"result": "accepted", "report": {"batch": 10, "within_s": 5.0}})
    assert g.wait_s(9, 1.0) == 4.0                     # staleness bound only
    assert g.wait_s(10, 1.0) == 0.0                    # reached the batch that matters
    assert g.wait_s(9, 6.0) == 0.0                     # too stale
    g.sent_at(10, 1.0, {"report": {"batch": None, "within_s": None}})
    assert g.wait_s(500, 1000.0) is None               # nothing it does matters
    g.sent_at(10, 1.0, None)                           # a failed send: back to the old way
    assert g.wait_s(11, 1.1) == 0.1 or abs(g.wait_s(11, 1.1) - 0.1) < 1e-9


def test_config_refuses_bounds_out_of_range_naming_the_field():
    import pytest

    from controller.config import ControllerConfig
    from sluice_common.errors import InputError
    from topologies import load_topology

    topo = load_topology("two-rack")
    for field in ("report_staleness_s", "report_heartbeat_s"):
        with pytest.raises(InputError) as err:
            ControllerConfig(topology=topo, **{field: 0.0})
        assert err.value.field == field
