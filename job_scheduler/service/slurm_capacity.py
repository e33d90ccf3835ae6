"""Capacity as Slurm sees it: what of the topology sluice may use now (pure, given
Slurm's nodes; :meth:`~job_scheduler.service.slurm_executor.SlurmExecutor.capacity`
reads them): only nodes of the configured partition, GPUs other jobs do not hold, and
no more GPUs than the node's free CPUs and memory leave room for (a worker asks
``--cpus-per-gpu`` CPUs, default one task's, and ``--mem-per-gpu`` when set)."""

from __future__ import annotations

import logging
from typing import Iterable, Mapping, Sequence

from sluice_common.placement import Placement
from job_scheduler.core.cluster_state import ClusterState
from slurm_client import NodeInfo, SiteOptions

_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def memory_mb(text: str) -> int:
    """Slurm's memory size (``16G``, ``16000`` = MB) in MB."""
    text = text.strip().upper()
    unit = text[-1] if text[-1] in _MB else "M"
    return int(int(text.rstrip("KMGT")) * _MB[unit])


def resource_room(node: NodeInfo, site: SiteOptions) -> tuple[int, str] | None:
    """How many more GPUs' workers the node's free CPUs and memory hold, and which runs
    out first; None when Slurm gave no CPU count."""
    limits = []
    if node.cpus:
        limits.append(((node.cpus - node.cpus_used) // (site.cpus_per_gpu or 1), "CPUs"))
    if site.mem_per_gpu and node.memory_mb:
        limits.append(((node.memory_mb - node.memory_used_mb) // max(1, memory_mb(
            site.mem_per_gpu)), "memory"))
    return min(limits) if limits else None


def foreign_gpus(nodes: Mapping[str, NodeInfo], own_running: Mapping[str, int],
                 gpu_type: str | None = None) -> dict[str, int]:
    """GPUs (of ``gpu_type``; None: whole GPUs of any type) that Slurm says are allocated
    on each node and that are not sluice's own running jobs' (another user's job, or one
    started outside sluice)."""
    return {name: max(0, n.gpus_of(gpu_type)[1] - own_running.get(name, 0))
            for name, n in nodes.items()}


def apply_capacity(state: ClusterState, nodes: Mapping[str, NodeInfo],
                   own_running: Mapping[str, int], gpu_type: str | None = None,
                   site: SiteOptions | None = None) -> dict[str, str]:
    """Take from ``state`` (already less sluice's recorded jobs) every GPU sluice may not
    use: all of a node Slurm does not know, that takes no work or is not in ``site``'s
    partition, the GPUs other jobs hold, and those the node's free CPUs/memory leave no
    room for (:func:`resource_room`). Only GPUs of ``gpu_type`` count when it is given
    (MIG slices never count as whole GPUs). Returns {host: why} for the hosts it took
    something from."""
    site = site or SiteOptions()
    # a partition no node is in: not filtered here, so that sbatch refuses it with
    # Slurm's own words (the job fails at submission) rather than waiting for ever
    partition = site.partition if any(site.partition in n.partitions
                                      for n in nodes.values()) else None
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
        elif partition and node.partitions and partition not in node.partitions:
            take, reason = free, f"not in partition {partition}"
        else:
            # Slurm may know fewer GPUs than the topology: never more than it has.
            missing = max(0, state.capacity[state.index[host]] - node.gpus_of(gpu_type)[0])
            take = min(free, max(foreign.get(host, 0), 0) + missing)
            reason = f"{foreign.get(host, 0)} GPU(s) held by other Slurm jobs" + (
                f", {missing} not {gpu_type or 'known to Slurm'}" if missing else "")
            room = resource_room(node, site)
            if room is not None and free - take > max(0, room[0]):
                short = free - take - max(0, room[0])
                take += short
                reason += f", {short} without free {room[1]}"
        if take > 0:
            state.allocate(Placement(f"slurm:{host}", (), (host,) * take))
            why[host] = reason
        elif node is not None and not node.usable:
            why[host] = reason
    return why


DUPLICATE_JOBID = "Duplicate jobid"  # slurmd's drain reason after a job ran twice
log = logging.getLogger("sluice.scheduler")


def resume_duplicate_drains(client, nodes: Iterable[NodeInfo], running: Sequence) -> None:
    """slurmd drains a node "Duplicate jobid" when a restarted slurmctld started a
    job twice (the batch script's O_EXCL guard made the second start wait, not run).
    Once none of sluice's jobs (``running``) runs there any more the node is resumed."""
    from slurm_client import SlurmError

    busy = {h for j in running for h in j.gpus_by_host()}
    for n in nodes:
        if DUPLICATE_JOBID in n.reason and n.name not in busy and "DRAIN" in n.flags:
            try:
                client.resume_node(n.name)
                log.warning("node %s was drained '%s': resumed (sluice reconciled its "
                            "jobs by Slurm id)", n.name, n.reason)
            except SlurmError as err:
                log.warning("could not resume node %s: %s", n.name, err)
