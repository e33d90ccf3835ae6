"""``ExchangePricing.fixed_s`` answers from its memo exactly what it computes afresh, per
argument; the memo is no part of the pricing's value (equality, hash, ``replace``)."""

from __future__ import annotations

from dataclasses import replace

from job_scheduler.core.exchange_pricing import ExchangePricing
from sluice_common import exchange as ex
from topologies import load_topology

TWO_RACK = load_topology("two-rack")


def _fresh(pricing: ExchangePricing, b, path, keys=None, window=None) -> float:
    rates = pricing.path if path is None else tuple(m * pricing.scale * 1e6 / 8 for m in path)
    return ex.fixed_batch_s(pricing.keys(b, keys), rates,
                            pricing.window if window is None else window, pricing.constants)


def test_fixed_s_memo_answers_what_a_fresh_computation_does():
    pricing = ExchangePricing.for_topology(TWO_RACK)
    asks = [(1e6, None), (1e6, ()), (1e6, (1000.0, 400.0)), (2e5, (1000.0, 400.0)),
            (1e6, (1000.0, 400.0), 3), (1e6, (1000.0, 400.0), None, 2)]
    first = [pricing.fixed_s(*a) for a in asks]
    assert first == [_fresh(pricing, *a) for a in asks]
    assert [pricing.fixed_s(*a) for a in asks] == first          # from the memo
    assert len(set(first)) > 3                                   # the arguments matter
    assert pricing.fixed_s(1e6, [1000.0, 400.0]) == first[2]     # a list path too


def test_the_memo_is_no_part_of_the_pricings_value():
    a, b = ExchangePricing.for_topology(TWO_RACK), ExchangePricing.for_topology(TWO_RACK)
    a.fixed_s(1e6, (1000.0, 400.0))
    assert a == b and hash(a) == hash(b)
    slower = replace(a.constants, overhead_s=a.constants.overhead_s + 0.5)
    deep = replace(a, constants=slower)          # another pricing: its own answers
    assert deep.fixed_s(1e6, (1000.0, 400.0)) == _fresh(deep, 1e6, (1000.0, 400.0))
    assert deep.fixed_s(1e6, (1000.0, 400.0)) != a.fixed_s(1e6, (1000.0, 400.0))
