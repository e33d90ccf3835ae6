"""The GPU grants ``ClusterState`` hands out and takes back, made from its own indices
without ``GpuGrant.of``'s checks: the same grant ``GpuGrant.of`` makes of them; and first
fit's pass over the hosts, skipping the full ones: the same take as a plain pass."""

from __future__ import annotations

import random

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.placement import FirstFitPlacement, _first_fit
from sluice_common.placement import GpuGrant, Placement
from topologies import load_topology


def test_grants_equal_what_gpugrant_of_makes_of_the_held_indices():
    state = ClusterState(load_topology("cluster-2k"))
    placer, rng, held = FirstFitPlacement(), random.Random(11), []
    for step in range(400):
        if held and (rng.random() < 0.45 or state.total_free < 64):
            p, grant = held.pop(rng.randrange(len(held)))
            assert state.release(p) == grant
        else:
            p = placer.place(state, f"j{step}", rng.choice((1, 2, 3, 5, 8, 16, 24)))
            grant = state.allocate(p)
            expected = GpuGrant.of({state.names[i]: ids
                                    for i, ids in state.held[p.job].items()})
            assert grant == expected and grant.by_host
            assert sum(len(ids) for _, ids in grant.by_host) == p.gpus
            held.append((p, grant))
    # a grant that names its indices (a decision's, a stored record's) is kept as named
    i = next(i for i, f in enumerate(state.free) if f >= 2)
    top = state.free_ids[i].bit_length() - 1
    host = state.names[i]
    named = GpuGrant.of({host: [top]})
    assert state.allocate(Placement("named", (host,), (host,)), named) == named
    assert state.release(Placement("named", (host,), (host,))) == named

def _plain_first_fit(free: list[int], n: int, order) -> dict[int, int]:
    counts = {}
    for h in order:
        take = min(n, free[h])
        if take:
            counts[h] = take
            free[h] -= take
            n -= take
            if not n:
                break
    return counts


def test_first_fit_takes_as_a_plain_pass_does():
    rng = random.Random(5)
    for _ in range(3000):
        free = [rng.choice((0, 0, 0, 1, 2, 4, 8)) for _ in range(rng.randint(1, 30))]
        n = rng.randint(0, max(sum(free), 1))
        order = list(range(len(free)))
        rng.shuffle(order)
        a, b = list(free), list(free)
        assert _first_fit(a, n, order) == _plain_first_fit(b, n, order) and a == b
