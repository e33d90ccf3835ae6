"""The model of Slurm's cons_tres + topology/tree choice (arms a and b of sluice demo)."""

from job_scheduler.core.placement import ClusterState
from job_scheduler.core.policies import make_policy
from job_scheduler.core.slurm_placement import SlurmTreePlacement, slurm_counts
from sluice_common.placement import Placement
from topologies import load_topology

RACKS = [[0, 1], [2, 3]]          # two racks of two 4-GPU nodes (two-rack-100g's shape)


def test_a_rack_that_holds_the_job_best_fit_then_a_node_that_holds_it():
    assert slurm_counts([4, 4, 4, 4], RACKS, 3) == {0: 3}
    # rack 2 has fewer free GPUs that still hold 3: it is the best fit; in it, node 3
    assert slurm_counts([4, 4, 1, 3], RACKS, 3) == {3: 3}
    # node 1 has fewer free than node 0 but both hold 2: best fit by node
    assert slurm_counts([4, 2, 0, 0], RACKS, 2) == {1: 2}


def test_nodes_in_order_when_no_node_holds_the_job():
    assert slurm_counts([4, 4, 4, 4], RACKS, 8) == {0: 4, 1: 4}
    assert slurm_counts([1, 2, 4, 4], RACKS, 6) == {2: 4, 3: 2}
    # no rack holds 6: the whole cluster, lowest-numbered nodes first
    assert slurm_counts([4, 0, 0, 4], RACKS, 6) == {0: 4, 3: 2}
    assert slurm_counts([2, 1, 2, 1], RACKS, 5) == {0: 2, 1: 1, 2: 2}


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
