"""The model of Slurm's cons_tres + topology/tree choice (arms a and b of sluice demo)."""

import random

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.policies import make_policy
from job_scheduler.core.slurm_placement import SlurmTreePlacement, slurm_counts
from sluice_common.placement import Placement
from topologies import load_topology

RACKS = [[0, 1], [2, 3]]          # two racks of two 4-GPU nodes (two-rack-100g's shape)


def test_the_rack_with_fewest_nodes_free_that_holds_the_job_then_most_free_nodes_first():
    assert slurm_counts([4, 4, 4, 4], RACKS, 3) == {0: 3}
    # both racks hold 3 on two nodes each: the first rack; in it the node with most free
    assert slurm_counts([4, 4, 1, 3], RACKS, 3) == {0: 3}
    assert slurm_counts([4, 2, 0, 0], RACKS, 2) == {0: 2}
    assert slurm_counts([2, 4, 0, 0], RACKS, 2) == {1: 2}
    # rack 2 holds the job on one node with a free GPU, rack 1 on two: rack 2 (real
    # slurmctld's choice, not the first rack's nor the fewest free GPUs')
    assert slurm_counts([2, 3, 2, 0], RACKS, 2) == {2: 2}


def test_most_free_nodes_first_when_no_node_holds_the_job():
    assert slurm_counts([4, 4, 4, 4], RACKS, 8) == {0: 4, 1: 4}
    assert slurm_counts([1, 2, 4, 4], RACKS, 6) == {2: 4, 3: 2}
    # no rack holds 6: the whole cluster
    assert slurm_counts([4, 0, 0, 4], RACKS, 6) == {0: 4, 3: 2}
    assert slurm_counts([1, 2, 0, 4], RACKS, 6) == {3: 4, 1: 2}
    assert slurm_counts([2, 1, 2, 1], RACKS, 5) == {0: 2, 2: 2, 1: 1}


def test_the_placer_puts_the_ps_on_the_first_node_and_the_policy_uses_it():
    topo = load_topology("two-rack-100g")
    state = ClusterState(topo)
    state.allocate(Placement("x", ("h1",), ("h1", "h1", "h1")))
    p = SlurmTreePlacement().place(state, "j", 6)
    names = [h.name for h in topo.hosts]
    assert p.worker_hosts == (names[2],) * 4 + (names[3],) * 2
    assert p.ps_hosts == (names[2],)
    assert SlurmTreePlacement().place(state, "j", 14) is None
    assert make_policy("fifo", placement="slurm").placer.name == "slurm"


def test_counts_are_the_rule_on_every_host_with_full_hosts_among_them():
    def by_rule(free, rack_hosts, n):       # the module doc's rule, every host sorted
        fitting = [r for r, hosts in enumerate(rack_hosts) if sum(free[h] for h in hosts) >= n]
        scope = ([h for hosts in rack_hosts for h in hosts] if not fitting else rack_hosts[
            min(fitting, key=lambda r: (sum(1 for h in rack_hosts[r] if free[h]), r))])
        counts = {}
        for h in sorted(scope, key=lambda h: (-free[h], h)):
            take = min(free[h], n)
            if take:
                counts[h], n = take, n - take
            if not n:
                break
        return counts

    rng = random.Random(5)
    for _ in range(300):
        racks = [list(range(r * 4, r * 4 + 4)) for r in range(rng.randrange(1, 5))]
        free = [rng.choice((0, 0, 0, 1, 2, 8)) for _ in range(4 * len(racks))]
        if not sum(free):
            continue
        n = rng.randrange(1, sum(free) + 1)
        got = slurm_counts(free, racks, n)
        assert got == by_rule(free, racks, n) and list(got) == list(by_rule(free, racks, n))
