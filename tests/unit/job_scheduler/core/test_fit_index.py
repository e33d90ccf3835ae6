from job_scheduler.core.fit_index import FitIndex


def test_walk_skips_sizes_that_do_not_fit_and_keeps_priority_order():
    idx = FitIndex()
    idx.add("a", (0, 1), 8)
    idx.add("b", (0, 2), 1)
    idx.add("c", (1, 0), 2)
    idx.add("d", (0, 3), 1)
    assert idx.best() == ((0, 1), "a") and idx.worst() == ((1, 0), "c")
    walk, budget, taken = idx.walk(), 3, []
    while (w := walk.peek(budget)) is not None:
        walk.take(w[2])
        taken.append(w[1])
        budget -= w[2]
    # a (8 GPUs) never fits 3; b, d (1 each) come before c by key; c (2) no longer fits
    assert taken == ["b", "d"] and budget == 1
    idx.remove("b")
    idx.add("d", (2, 0), 1)          # re-keyed
    assert [e[1] for e in idx.ordered()] == ["a", "c", "d"] and len(idx) == 3
    assert list(idx.merged()) == idx.ordered() == [((0, 1), "a", 8), ((1, 0), "c", 2),
                                                   ((2, 0), "d", 1)]
