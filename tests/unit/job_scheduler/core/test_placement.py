"""Placement: Liquid rack cost, best fit, first fit, Tetris and the group GA (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job_scheduler.core.placement import (BestFitPlacement, FirstFitPlacement, GroupGA, Request,
                                          TetrisPlacement, _score_idx)
from sluice_common.placement import Placement
from job_scheduler.core.cluster_state import ClusterState
from topologies import load_topology

TWO_RACK = load_topology("two-rack")           # rack1: h1 h2, rack2: h3 h4, 4 GPUs each
FAT_TREE = load_topology("fat-tree")           # 4 pods (domains) x 2 racks x 2 hosts


def cost(topology, a: str, b: str) -> int:
    """Liquid's rack cost between two hosts of ``topology`` (by name)."""
    state = ClusterState(topology)
    return state.cost(state.index[a], state.index[b])


def placement_score(state: ClusterState, placements, lam: float = 0.5) -> float:
    """The GA's objective (``_score_idx``) of placements given by host name."""
    ix = state.index
    return _score_idx(state, [([ix[h] for h in p.ps_hosts], [ix[h] for h in p.worker_hosts])
                              for p in placements], lam)


def test_rack_cost_hand_checked_on_two_rack():
    assert cost(TWO_RACK, "h1", "h1") == 0
    assert cost(TWO_RACK, "h1", "h2") == 2        # same rack: 2 nodes in rack1
    assert cost(TWO_RACK, "h1", "h3") == 4        # across racks: 4 nodes in the one domain
    assert cost(TWO_RACK, "h4", "h2") == 4


def test_rack_cost_across_domains_on_fat_tree():
    # fat-tree k=4: rack = 2 hosts, pod (domain) = 4 hosts, cluster = 16 hosts
    assert cost(FAT_TREE, "h1", "h2") == 2
    assert cost(FAT_TREE, "h1", "h3") == 4
    assert cost(FAT_TREE, "h1", "h5") == 16


def test_fitness_prefers_fuller_hosts():
    s = ClusterState(TWO_RACK)
    s.allocate(Placement("x", ("h2",), ("h2", "h2")))
    assert s.fitness(s.index["h2"]) == pytest.approx(-3 / 4)
    assert s.fitness(s.index["h1"]) == pytest.approx(-1 / 4)


def test_allocate_release_and_overcommit_rejected():
    s = ClusterState(TWO_RACK)
    p = Placement("x", ("h1",), ("h1",) * 4)
    s.allocate(p)
    assert s.total_free == 12 and s.rack_free == [4, 8]
    with pytest.raises(ValueError):
        s.allocate(Placement("y", ("h1",), ("h1",)))
    assert s.total_free == 12                     # the failed allocation changed nothing
    s.release(p)
    assert s.free == [4, 4, 4, 4] and s.total_free == 16


def test_best_fit_single_host_when_it_fits_and_tightest_host():
    s = ClusterState(TWO_RACK)
    s.allocate(Placement("x", ("h3",), ("h3",) * 2))       # h3 has 2 free
    p = BestFitPlacement().place(s, "j", 2)
    assert set(p.worker_hosts) == {"h3"} and p.ps_hosts == ("h3",)


def test_best_fit_keeps_a_job_in_one_rack_when_it_fits():
    s = ClusterState(TWO_RACK)
    s.allocate(Placement("x", ("h1",), ("h1",) * 3))       # rack1: 5 free, rack2: 8 free
    s.allocate(Placement("y", ("h3",), ("h3",) * 1))       # rack2: 7 free
    p = BestFitPlacement().place(s, "j", 6)
    racks = {TWO_RACK.rack_of(h) for h in p.worker_hosts}
    assert racks == {"rack2"} and len(p.worker_hosts) == 6
    # first fit, by contrast, starts at h1 and spans both racks
    q = FirstFitPlacement().place(s, "j", 6)
    assert {TWO_RACK.rack_of(h) for h in q.worker_hosts} == {"rack1", "rack2"}


def test_best_fit_spans_racks_only_when_no_rack_fits_and_returns_none_when_full():
    s = ClusterState(TWO_RACK)
    p = BestFitPlacement().place(s, "j", 12)
    assert len(p.worker_hosts) == 12
    s.allocate(p)
    assert BestFitPlacement().place(s, "k", 5) is None
    assert BestFitPlacement().place(s, "k", 4) is not None


def test_placements_put_ps_with_the_most_workers():
    s = ClusterState(TWO_RACK)
    s.allocate(Placement("x", ("h1",), ("h1",) * 3))
    p = BestFitPlacement().place(s, "j", 5)                 # rack1: h1 1 free + h2 4 free
    assert sorted(p.worker_hosts) == ["h1"] + ["h2"] * 4
    assert p.ps_hosts == ("h2",)


def test_tetris_places_all_workers_and_respects_capacity():
    s = ClusterState(TWO_RACK)
    s.allocate(Placement("x", ("h1",), ("h1",) * 3))
    p = TetrisPlacement().place(s, "j", 6)
    assert len(p.worker_hosts) == 6
    s.allocate(p)                                           # raises if over capacity
    assert s.total_free == 16 - 3 - 6


@settings(max_examples=40, deadline=None)
@given(used=st.lists(st.integers(0, 4), min_size=4, max_size=4), n=st.integers(1, 16),
       which=st.sampled_from(["best", "first", "tetris"]))
def test_every_strategy_places_exactly_n_within_capacity(used, n, which):
    s = ClusterState(TWO_RACK)
    for h, u in zip(("h1", "h2", "h3", "h4"), used):
        if u:
            s.allocate(Placement("bg", (h,), (h,) * u))
    strat = {"best": BestFitPlacement(), "first": FirstFitPlacement(),
             "tetris": TetrisPlacement()}[which]
    p = strat.place(s, "j", n)
    if n > s.total_free:
        assert p is None
    else:
        assert len(p.worker_hosts) == n and len(p.ps_hosts) == 1
        s.allocate(p)


def _batch_state():
    s = ClusterState(load_topology("leaf-spine:leaves=4,spines=2,hosts_per_leaf=2"))
    s.allocate(Placement("bg1", ("h1",), ("h1",) * 3))
    s.allocate(Placement("bg2", ("h4",), ("h4",) * 1))
    s.allocate(Placement("bg3", ("h6",), ("h6",) * 2))
    return s


REQS = [Request("a", 5), Request("b", 3), Request("c", 6), Request("d", 2), Request("e", 4)]


def test_group_ga_reproducible_for_a_seed():
    s = _batch_state()
    a = GroupGA(seed=7).place_batch(s, REQS)
    b = GroupGA(seed=7).place_batch(s, REQS)
    assert a == b
    assert all(p is not None and p.gpus == r.n for p, r in zip(a, REQS))


def test_group_ga_never_worse_than_best_fit_and_feasible():
    s = _batch_state()
    work = s.copy()
    seq = []
    for r in REQS:
        p = BestFitPlacement().place(work, r.job, r.n)
        work.allocate(p)
        seq.append(p)
    for seed in range(4):
        ga = GroupGA(seed=seed).place_batch(s, REQS)
        assert placement_score(s, ga) <= placement_score(s, seq) + 1e-9
        check = s.copy()
        for p in ga:
            check.allocate(p)                               # all fit together
    assert s.total_free == ClusterState(s.topology).total_gpus - 6   # input untouched


def test_group_ga_improves_a_bad_first_fit_batch():
    # the GA's objective must actually move: a batch that best fit handles jointly
    # better than first fit
    s = _batch_state()
    work = s.copy()
    ff = []
    for r in REQS:
        p = FirstFitPlacement().place(work, r.job, r.n)
        work.allocate(p)
        ff.append(p)
    ga = GroupGA(seed=1).place_batch(s, REQS)
    assert placement_score(s, ga) < placement_score(s, ff)


def test_group_ga_leaves_out_jobs_that_cannot_fit():
    s = ClusterState(TWO_RACK)
    out = GroupGA(seed=0).place_batch(s, [Request("a", 10), Request("b", 10), Request("c", 6)])
    assert out[0] is not None and out[1] is None and out[2] is not None


def test_tetris_grouped_scoring_matches_scoring_every_host():
    """Tetris scores hosts per (free count, capacity) group; scoring each host one by
    one (the definition) must choose the same hosts."""
    import random as _random
    from job_scheduler.core.placement import TetrisPlacement
    rng = _random.Random(7)
    topo = load_topology("leaf-spine")

    def by_every_host(state, n):
        counts, left = {}, n
        while left:
            best = min((*TetrisPlacement._score(state.free[h] - counts.get(h, 0),
                                                state.capacity[h], left, n), h)
                       for h in range(state.cluster_size)
                       if state.free[h] - counts.get(h, 0) > 0)
            h = best[2]
            take = min(left, state.free[h] - counts.get(h, 0))
            counts[h] = counts.get(h, 0) + take
            left -= take
        return tuple(state.names[h] for h in sorted(counts) for _ in range(counts[h]))

    for _ in range(200):
        state = ClusterState(topo)
        for h in range(state.cluster_size):
            if rng.random() < 0.7:
                state.allocate(Placement("x", (state.names[h],),
                                         (state.names[h],) * rng.randint(0, state.capacity[h])))
        n = rng.randint(1, max(1, min(20, state.total_free)))
        if state.total_free:
            assert TetrisPlacement().place(state, "j", n).worker_hosts == by_every_host(state, n)


def test_liquid_score_is_the_papers_weighted_sum():
    from job_scheduler.core.placement import liquid_score
    assert liquid_score(0.5, 4, -0.75) == pytest.approx(1.625)
    assert liquid_score(1.0, 4, -0.75) == 4.0 and liquid_score(0.0, 4, -0.75) == -0.75
