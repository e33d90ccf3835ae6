"""A model of where Slurm's ``select/cons_tres`` with ``topology/tree`` (the local Slurm
cluster's configuration, ``mininet_fabric/slurm_config.py``) puts a job that asks for
``--gpus=N`` and names no node: the placement of the demo's arms (a) and (b), "as a
Slurm cluster runs them today" (``end_to_end/arms.py``). Pure, no I/O.

The rule (``tests/fabric/slurm/test_slurm_placement.py`` compares it, allocation by
allocation, with a real slurmctld's choice):

1. the leaf switch (rack) to use: among the racks whose free GPUs hold the whole job,
   the one with the fewest free (best fit), ties by rack order; if none holds it, the
   whole cluster;
2. inside it: a single node that holds the whole job, the one with the fewest free
   GPUs (best fit by node), ties by node order; else nodes in node order (lowest
   numbered first), each giving all its free GPUs until N;
3. the parameter server on the first node of the allocation (the batch host, where a
   job script starts it), like every PS of a multi-PS job.
"""

from __future__ import annotations

from job_scheduler.core.cluster_state import ClusterState
from sluice_common.placement import Placement


class SlurmTreePlacement:
    """``place(state, job, n, num_ps)`` as Slurm's cons_tres + topology/tree (module doc)."""

    name = "slurm"

    def place(self, state: ClusterState, job: str, n: int, num_ps: int = 1) -> Placement | None:
        if n <= 0 or n > state.total_free:
            return None
        counts = slurm_counts(state.free, state.rack_hosts, n)
        hosts = sorted(counts)
        workers = tuple(state.names[h] for h in hosts for _ in range(counts[h]))
        return Placement(job, tuple(state.names[hosts[0]] for _ in range(max(num_ps, 0))),
                         workers)


def slurm_counts(free: list[int], rack_hosts: list[list[int]], n: int) -> dict[int, int]:
    """Host index -> GPUs for a job of ``n`` GPUs (``n`` <= sum(free)); see the module doc."""
    rack_free = [sum(free[h] for h in hosts) for hosts in rack_hosts]
    fitting = [r for r, f in enumerate(rack_free) if f >= n]
    if fitting:
        scope = rack_hosts[min(fitting, key=lambda r: (rack_free[r], r))]
    else:
        scope = sorted(h for hosts in rack_hosts for h in hosts)
    single = [h for h in scope if free[h] >= n]
    if single:
        return {min(single, key=lambda h: (free[h], h)): n}
    counts: dict[int, int] = {}
    for h in sorted(scope):
        take = min(free[h], n)
        if take:
            counts[h] = take
            n -= take
        if not n:
            break
    return counts
