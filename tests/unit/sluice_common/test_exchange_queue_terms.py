"""The exchange model's queue terms: the loss and timeout term of a
shallow FIFO and the per-flow fair-share term of the fair queue (their calibration:
tests/unit/mininet_tests/calibration/test_queues.py)."""

from dataclasses import replace

import pytest

from sluice_common.exchange import ExchangeConstants, Sharer, egress_state
from sluice_common.exchange_waits import (MSS_BYTES, backlog_bytes, fair_round_wait_s,
                                          fifo_round_wait_s, loss_wait_s, overflow_share, queue_wait_s, tail_share)

C = ExchangeConstants(overhead_s=0.01, per_key_s=0.002, hop_s=0.0005, efficiency=0.8,
                      local_Bps=100e6, queue_fill=0.5, burst_bytes=15000.0, rto_min_s=0.2,
                      loss_timeouts=1.5, fair_round_bytes=20000.0)
CROSS = (3e6, 1.5e6, 1.5e6, 3e6)


def test_overflow_is_what_the_senders_bursts_bring_beyond_the_fifo():
    # two others sending at once: three bursts arrive, a FIFO of one burst holds a third
    assert overflow_share([1.0, 1.0], 15000.0, C) == pytest.approx(2 / 3)
    assert overflow_share([0.5], 15000.0, C) == pytest.approx(1 - 1 / 1.5)
    # the deep FIFO holds every burst: no loss
    assert overflow_share([1.0] * 6, 200 * 1514.0, C) == 0.0
    # shallower FIFOs lose more
    assert overflow_share([1.0], 5000.0, C) > overflow_share([1.0], 10000.0, C) > 0


def test_loss_wait_is_busy_times_overflow_times_timeouts():
    ahead = [0.5, 0.5]
    expected = (1 - 0.25) * overflow_share(ahead, 15000.0, C) * 1.5 * 0.2
    assert loss_wait_s(ahead, 15000.0, C) == pytest.approx(expected)
    assert loss_wait_s([], 15000.0, C) == 0.0                 # alone: nothing to collide with
    assert loss_wait_s(ahead, 200 * 1514.0, C) == 0.0         # the deep FIFO
    assert loss_wait_s(ahead, 15000.0, replace(C, loss_timeouts=0.0)) == 0.0
    assert fifo_round_wait_s(ahead, 1.5e6, 15000.0, C) == pytest.approx(
        queue_wait_s(ahead, 1.5e6, 15000.0, C) + expected)
    with pytest.raises(ValueError):
        loss_wait_s(ahead, -1.0, C)


def test_a_fifo_shorter_than_the_backlog_moves_the_wait_it_does_not_remove_it():
    deep, mid, short = 200 * 1514.0, 50 * 1514.0, 15000.0
    backlog = replace(C, backlog_bytes=150000.0, loss_timeouts=0.0)
    assert backlog_bytes(short, backlog) == backlog_bytes(mid, backlog) == 150000.0
    assert backlog_bytes(deep, backlog) == deep          # a deeper FIFO holds it all
    assert backlog_bytes(mid, C) == mid                  # no backlog: the FIFO's own bytes
    ahead = [0.5, 0.5]
    # below the backlog every depth waits the same standing bytes ...
    assert fifo_round_wait_s(ahead, 1.5e6, short, backlog) == pytest.approx(
        fifo_round_wait_s(ahead, 1.5e6, mid, backlog))
    assert fifo_round_wait_s(ahead, 1.5e6, mid, backlog) == pytest.approx(
        queue_wait_s(ahead, 1.5e6, 150000.0, backlog))
    # ... above it the FIFO's depth counts, as without the term
    assert fifo_round_wait_s(ahead, 1.5e6, deep, backlog) == pytest.approx(
        fifo_round_wait_s(ahead, 1.5e6, deep, replace(backlog, backlog_bytes=0.0)))
    # a class below waits the upper classes' backlog, not only what their FIFO holds
    jobs = [Sharer("urgent", 8e5, 8, CROSS, 0.05, 3, cls=0),
            Sharer("bulk", 8e5, 8, CROSS, 0.05, 3, cls=1)]
    slow, _ = egress_state(jobs, 1.5e6, mid, backlog)
    fast, _ = egress_state(jobs, 1.5e6, mid, replace(backlog, backlog_bytes=0.0))
    assert slow["bulk"] > fast["bulk"]
    with pytest.raises(ValueError, match="backlog_bytes"):
        replace(C, backlog_bytes=-1.0)


def test_only_a_drop_fast_retransmit_cannot_recover_needs_a_timeout():
    assert tail_share(None) == 1.0 and tail_share(120) == 1.0      # control messages
    assert tail_share(3 * MSS_BYTES) == 1.0
    assert tail_share(30 * MSS_BYTES) == pytest.approx(0.1)      # a drop in its last 3 of 30
    assert loss_wait_s([0.5], 15000.0, C, 30 * MSS_BYTES) == pytest.approx(
        0.1 * loss_wait_s([0.5], 15000.0, C))
    # a job's start-up rounds (control messages) pay the whole term, its bulk keys less
    jobs = [Sharer(f"j{k}", 8e5, 8, CROSS, 0.05, 3) for k in range(3)]
    plain = replace(C, loss_timeouts=0.0)
    its, waits = egress_state(jobs, 1.5e6, 15000.0, C)
    its0, waits0 = egress_state(jobs, 1.5e6, 15000.0, plain)
    for n in its:
        per_round_batch = (its[n] - its0[n]) / 6                 # 2 * ceil(8 / 3) rounds
        assert waits[n] - waits0[n] > 5 * per_round_batch > 0


def test_fair_round_wait_grows_with_the_other_active_flows():
    assert fair_round_wait_s([], 1.5e6, C) == 0.0
    assert fair_round_wait_s([0.5, 0.5], 1.5e6, C) == pytest.approx(1.0 * 20000 / 1.5e6)
    assert fair_round_wait_s([1.0] * 4, 1.5e6, C) == pytest.approx(4 * 20000 / 1.5e6)
    with pytest.raises(ValueError):
        fair_round_wait_s([0.5], 0.0, C)


def test_the_terms_reach_the_fixed_point_only_on_their_own_queue():
    jobs = [Sharer(f"j{k}", 4e5, 8, CROSS, 0.05, 3) for k in range(4)]
    no_terms = replace(C, loss_timeouts=0.0, fair_round_bytes=0.0)
    # the short FIFO: the loss term makes every job slower
    shallow, shallow_plain = (egress_state(jobs, 1.5e6, 15000.0, c)[0] for c in (C, no_terms))
    assert all(shallow[n] > shallow_plain[n] for n in shallow)
    # the deep FIFO: no loss, so the constant changes nothing
    deep, deep_plain = (egress_state(jobs, 1.5e6, 3e5, c)[0] for c in (C, no_terms))
    assert deep == pytest.approx(deep_plain)
    # fair leaves: the per-flow term makes every job slower; the loss term is not applied
    fair, fair_plain = (egress_state(jobs, 1.5e6, 15000.0, c, urgent_bytes=3e5)[0]
                        for c in (C, replace(no_terms, loss_timeouts=C.loss_timeouts)))
    assert all(fair[n] > fair_plain[n] for n in fair)


def test_bad_constants_are_refused():
    with pytest.raises(ValueError, match="loss_timeouts"):
        replace(C, loss_timeouts=-1.0)
    with pytest.raises(ValueError, match="fair_round_bytes"):
        replace(C, fair_round_bytes=-1.0)
