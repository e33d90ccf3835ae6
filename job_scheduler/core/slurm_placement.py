"""A model of where Slurm's ``select/cons_tres`` with ``topology/tree`` (the local Slurm
cluster's configuration, ``mininet_fabric/slurm_config.py``) puts a job that asks for
``--gpus=N`` and names no node: the placement of the demo's arms (a) and (b), "as a
Slurm cluster runs them today" (``end_to_end/arms.py``). Pure, no I/O.

The rule (``tests/fabric/slurm/test_slurm_placement.py`` compares it, allocation by
allocation, with a real slurmctld's choice on the same free GPUs; it was fitted to that
test's first run, where nodes in order and a best fit by node missed 2 of 9 choices):

1. the leaf switch (rack) to use: among the racks whose free GPUs hold the whole job,
   the one with the fewest nodes that have a free GPU (Slurm's best fit is by node
   count), ties by rack order; if none holds it, the whole cluster;
2. inside it, the nodes with the most free GPUs first (ties by node order), each giving
   all its free GPUs until N: a node that holds the whole job alone gets it when it is
   the one with the most free;
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
        counts = slurm_counts(state.free, state.rack_hosts, n, state.rack_free, state.rack_open)
        hosts = sorted(counts)
        workers = tuple(state.names[h] for h in hosts for _ in range(counts[h]))
        return Placement(job, tuple(state.names[hosts[0]] for _ in range(max(num_ps, 0))),
                         workers)


def slurm_counts(free: list[int], rack_hosts: list[list[int]], n: int,
                 rack_free: list[int] | None = None,
                 rack_open: list[int] | None = None) -> dict[int, int]:
    """Host index -> GPUs for a job of ``n`` GPUs (``n`` <= sum(free)); see the module doc.
    ``rack_free``, ``rack_open``: each rack's free GPUs and hosts with a free GPU, when
    the caller keeps them (``ClusterState``; None: counted here)."""
    if rack_free is None:
        rack_free = [sum(free[h] for h in hosts) for hosts in rack_hosts]
    fitting = [r for r in range(len(rack_hosts)) if rack_free[r] >= n]
    if fitting:
        if rack_open is None:
            rack_open = [sum(1 for h in hosts if free[h] > 0) for hosts in rack_hosts]
        r = min(fitting, key=lambda r: (rack_open[r], r))
        scope = rack_hosts[r]
    else:
        scope = [h for hosts in rack_hosts for h in hosts]
    counts: dict[int, int] = {}
    # a host with no free GPU takes nothing and sorts last: left out before sorting (on a
    # full cluster most are), the hosts that take come in the same order
    for h in sorted([h for h in scope if free[h] > 0], key=lambda h: (-free[h], h)):
        take = min(free[h], n)
        if take:
            counts[h] = take
            n -= take
        if not n:
            break
    return counts
