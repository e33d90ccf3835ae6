"""An uplink's senders' shares kept summed give a job's busy share and sum of the others
as summing them afresh does, through joins, changes and leaves."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from job_scheduler.simulation import send_shares
from job_scheduler.simulation.send_shares import SendShares, direct_sums

shares = st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0), st.floats(-0.5, 1.5))
ops = st.lists(st.tuples(st.integers(0, 11), st.one_of(st.none(), shares)), max_size=300)


def _close(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b))


@settings(max_examples=300, deadline=None)
@given(ops, st.sets(st.integers(0, 11)))
def test_kept_sums_are_the_direct_sums_of_the_senders_left_in(steps, excluded):
    kept, plain = SendShares(), {}
    for j, rho in steps:
        if rho is None:
            kept.drop(j)
            plain.pop(j, None)
        else:
            kept.set(j, rho)
            plain[j] = rho
        want = direct_sums([p for i, p in plain.items() if i not in excluded])
        got = kept.without(excluded)
        assert _close(got, want), (got, want)
        assert 0.0 <= got[0] <= 1.0 and got[1] >= 0.0
    assert len(kept) == len(plain) and all(j in kept for j in plain)


def test_no_sender_left_is_exactly_idle():
    kept = SendShares([(1, 0.3), (2, 1.0)])
    assert kept.without((1, 2)) == (0.0, 0.0)
    assert kept.without((1,)) == (1.0, 1.0)       # a sender that never pauses: always busy
    kept.drop(2)
    busy, total = kept.without((7,))              # not a sender: nothing to leave out
    assert math.isclose(busy, 0.3) and math.isclose(total, 0.3)


def test_the_sums_are_rebuilt_before_rounding_gathers():
    kept = SendShares([(0, 0.1)])
    for k in range(send_shares.REBUILD_EVERY * 3):
        kept.set(1, (k % 7) / 10)
    busy, total = kept.without(())
    fresh = direct_sums([0.1, ((send_shares.REBUILD_EVERY * 3 - 1) % 7) / 10])
    assert math.isclose(busy, fresh[0], rel_tol=1e-12) and math.isclose(total, fresh[1],
                                                                        rel_tol=1e-12)
