"""Capacity as Slurm sees it: what of the topology sluice may use now (pure, given
Slurm's nodes; :meth:`~job_scheduler.service.slurm_executor.SlurmExecutor.capacity`
reads them)."""

from __future__ import annotations

from typing import Mapping

from job_scheduler.core.placement import ClusterState, Placement
from slurm_client import NodeInfo


def foreign_gpus(nodes: Mapping[str, NodeInfo], own_running: Mapping[str, int],
                 gpu_type: str | None = None) -> dict[str, int]:
    """GPUs (of ``gpu_type``; None: whole GPUs of any type) that Slurm says are allocated
    on each node and that are not sluice's own running jobs' (another user's job, or one
    started outside sluice)."""
    return {name: max(0, n.gpus_of(gpu_type)[1] - own_running.get(name, 0))
            for name, n in nodes.items()}


def apply_capacity(state: ClusterState, nodes: Mapping[str, NodeInfo],
                   own_running: Mapping[str, int], gpu_type: str | None = None
                   ) -> dict[str, str]:
    """Take from ``state`` (already less sluice's recorded jobs) every GPU sluice may not
    use: all of a node Slurm does not know or that takes no work, and the GPUs other
    jobs hold. Only GPUs of ``gpu_type`` count when it is given (MIG slices never count
    as whole GPUs). Returns {host: why} for the hosts it took something from."""
    foreign = foreign_gpus(nodes, own_running, gpu_type)
    why: dict[str, str] = {}
    for host in state.names:
        free = state.free[state.index[host]]
        node = nodes.get(host)
        if node is None:
            take, reason = free, "not a Slurm node"
        elif not node.usable:
            take, reason = free, f"Slurm state {node.state_text}" + (
                f" ({node.reason})" if node.reason else "")
        else:
            # Slurm may know fewer GPUs than the topology: never more than it has.
            missing = max(0, state.capacity[state.index[host]] - node.gpus_of(gpu_type)[0])
            take = min(free, max(foreign.get(host, 0), 0) + missing)
            reason = f"{foreign.get(host, 0)} GPU(s) held by other Slurm jobs" + (
                f", {missing} not {gpu_type or 'known to Slurm'}" if missing else "")
        if take > 0:
            state.allocate(Placement(f"slurm:{host}", (), (host,) * take))
            why[host] = reason
        elif node is not None and not node.usable:
            why[host] = reason
    return why
