"""Ranking PS flows by training progress (pure)."""

from hypothesis import given, strategies as st

from controller.ranking import PULL, PUSH, FlowKey, assign_levels, ordered


def flow(job, kind, worker="w0", server="s0", port=9000):
    src, dst = ("10.0.0.3", "10.0.0.1") if kind == PUSH else ("10.0.0.1", "10.0.0.3")
    return FlowKey(job, kind, worker, server, src, dst, port)


def test_smaller_batch_first_and_pull_before_push():
    a_pull, a_push = flow("a", PULL), flow("a", PUSH)
    b_pull, b_push = flow("b", PULL, port=9100), flow("b", PUSH, port=9100)
    levels = assign_levels([(a_pull, 10), (a_push, 10), (b_pull, 3), (b_push, 3)], 8)
    assert levels == {b_pull: 0, b_push: 1, a_pull: 2, a_push: 3}


def test_equal_urgency_shares_a_level_and_order_is_deterministic():
    w0, w1 = flow("a", PUSH, "w0"), flow("a", PUSH, "w1")
    levels = assign_levels([(w1, 5), (w0, 5)], 8)
    assert levels[w0] == levels[w1] == 0
    assert [f for f, _ in ordered([(w1, 5), (w0, 5)])] == [w0, w1]


def test_more_urgencies_than_levels_are_compressed_in_order():
    flows = [(flow(f"j{i}", PUSH, port=9000 + i), i) for i in range(20)]
    levels = assign_levels(flows, 4)
    got = [levels[f] for f, _ in flows]
    assert got == sorted(got)              # order kept
    assert set(got) == {0, 1, 2, 3}        # every level used
    assert got[0] == 0 and got[-1] == 3


def test_single_level_puts_everything_together():
    flows = [(flow("a", PULL), 1), (flow("b", PUSH, port=9100), 7)]
    assert set(assign_levels(flows, 1).values()) == {0}


@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from([PULL, PUSH])),
                min_size=1, max_size=30), st.integers(1, 8))
def test_levels_are_monotone_in_urgency(items, n_levels):
    flows = [(flow(f"j{i}", kind, port=9000 + i), batch) for i, (batch, kind) in enumerate(items)]
    levels = assign_levels(flows, n_levels)
    assert all(0 <= lv < n_levels for lv in levels.values())
    for f1, b1 in flows:
        for f2, b2 in flows:
            if (b1, f1.kind == PUSH) < (b2, f2.kind == PUSH):
                assert levels[f1] <= levels[f2]
    assert assign_levels(list(reversed(flows)), n_levels) == levels
