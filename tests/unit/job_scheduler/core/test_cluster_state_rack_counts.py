"""The per-rack counts ``ClusterState`` keeps as GPUs are taken and given back (free GPUs,
hosts with a free GPU), and Slurm's model reading them instead of counting: the same
choice either way."""

from __future__ import annotations

import random

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.slurm_placement import SlurmTreePlacement, slurm_counts
from topologies import load_topology


def _counted(state: ClusterState) -> tuple[list[int], list[int]]:
    free = [sum(state.free[h] for h in hosts) for hosts in state.rack_hosts]
    open_ = [sum(1 for h in hosts if state.free[h] > 0) for hosts in state.rack_hosts]
    return free, open_


def test_rack_counts_follow_every_allocation_and_release():
    state = ClusterState(load_topology("cluster-2k"))
    assert (state.rack_free, state.rack_open) == _counted(state)
    placer, rng, held = SlurmTreePlacement(), random.Random(7), []
    for step in range(600):
        if held and (rng.random() < 0.4 or state.total_free < 64):
            state.release(held.pop(rng.randrange(len(held))))
        else:
            p = placer.place(state, f"j{step}", rng.choice((1, 2, 3, 4, 8, 16, 24)))
            state.allocate(p)
            held.append(p)
        assert (state.rack_free, state.rack_open) == _counted(state)
        copy = state.copy()
        assert copy.rack_open == state.rack_open and copy.rack_open is not state.rack_open
    assert any(o < len(h) for o, h in zip(state.rack_open, state.rack_hosts))   # some full


def test_slurm_counts_choose_alike_with_kept_or_counted_rack_figures():
    rng = random.Random(3)
    racks = [[0, 1, 2], [3, 4], [5, 6, 7, 8]]
    for _ in range(2000):
        free = [rng.choice((0, 0, 1, 2, 4, 8)) for _ in range(9)]
        if not sum(free):
            continue
        n = rng.randint(1, sum(free))
        rack_free = [sum(free[h] for h in hs) for hs in racks]
        rack_open = [sum(1 for h in hs if free[h] > 0) for hs in racks]
        assert (slurm_counts(free, racks, n, rack_free, rack_open)
                == slurm_counts(free, racks, n))
