"""The FIFO round wait is its two terms, each computed as alone, to the last digit (it
shares their busy share and sum of senders), and a share outside [0, 1] is clamped."""

from __future__ import annotations

import math
import random

import pytest

from sluice_common.exchange import ExchangeConstants
from sluice_common.exchange_waits import (backlog_bytes, busy_share, fifo_round_wait_s,
                                          fifo_wait_of_sums, fifo_wait_of_sums_at,
                                          loss_wait_s, queue_wait_s)

C = ExchangeConstants(overhead_s=0.01, per_key_s=0.002, hop_s=0.0005, efficiency=0.8,
                      local_Bps=100e6, queue_fill=0.5, burst_bytes=15000.0, rto_min_s=0.2,
                      loss_timeouts=1.5, fair_round_bytes=20000.0)


def test_fifo_round_wait_is_exactly_its_queue_and_loss_terms():
    rng = random.Random(11)
    for _ in range(500):
        ahead = [rng.random() for _ in range(rng.randrange(0, 30))]
        left, buffer = rng.uniform(1e5, 1e9), rng.choice((15000.0, 302800.0, 50e6))
        message = rng.choice((None, 1000.0, 4e6))
        want = (queue_wait_s(ahead, left, backlog_bytes(buffer, C), C)
                + loss_wait_s(ahead, buffer, C, message))
        assert fifo_round_wait_s(ahead, left, buffer, C, message) == want


def test_the_bound_fifo_wait_of_sums_is_the_same_to_the_last_digit():
    rng = random.Random(12)
    for _ in range(2000):
        busy, senders = rng.random(), rng.choice((0.0, 0.5, 1.0, rng.uniform(0, 40)))
        mbps, scale = rng.uniform(1.0, 1e5), rng.choice((1.0, 0.37, 12.5))
        buffer = rng.choice((0.0, 15000.0, 302800.0, 50e6))
        message = rng.choice((None, 1000.0, 4e6))
        wait = fifo_wait_of_sums_at(buffer, C, scale, message)
        assert wait(busy, senders, mbps) == fifo_wait_of_sums(
            busy, senders, mbps * scale * 1e6 / 8, buffer, C, message)
    with pytest.raises(ValueError):
        fifo_wait_of_sums_at(15000.0, C, 1.0)(0.5, 1.0, 0.0)


def test_busy_share_clamps_each_share_to_0_1():
    assert busy_share([]) == 0.0
    assert busy_share([1.5]) == 1.0
    assert busy_share([-0.5, 0.5]) == 0.5
    assert busy_share([0.25, 0.5]) == 1.0 - 0.75 * 0.5
    assert busy_share(p for p in (0.5, 0.5)) == 0.75          # any iterable
    assert busy_share([math.nan, 0.5]) == 0.5                 # as max(0, nan): 0
