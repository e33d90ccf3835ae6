"""Under ``--executor slurm`` the GPU indices Slurm gave each running job are the truth.

sluice decides a job's GPU indices, but Slurm binds a job's GRES itself (the indices in
its ``scontrol -d show job`` detail, ``slurm_client.gres_indices``), and another user's job holds
indices sluice never decided. Each slot, before the policy decides
(``SlurmExecutor.capacity``), :func:`apply_gres_truth` makes the cluster state say what
Slurm says: a sluice job whose Slurm indices differ from its record holds Slurm's (the
store is told through ``SlurmExecutor.learned``), and every index another Slurm job
holds is taken, so it is never handed out. Pure, given Slurm's answer.
"""

from __future__ import annotations

import logging
from typing import Mapping

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.service.gpu_records import recorded_placement
from job_scheduler.service.store import JobRecord
from slurm_client.gres_indices import foreign_gpu_indices
from sluice_common.placement import GpuGrant, Placement

log = logging.getLogger("sluice.scheduler.slurm")


def _own_truth(state: ClusterState, job: JobRecord, ids: Mapping[str, list[int]]) -> GpuGrant | None:
    """Job's GPUs in ``state`` as Slurm gave them; the grant (None: left as recorded)."""
    placement, recorded = recorded_placement(job)
    workers = set(placement.worker_hosts)
    truth = GpuGrant.of({h: v for h, v in ids.items() if h in workers})
    if truth == recorded or not truth.by_host:
        return truth if truth.by_host else None
    try:
        held = state.release(placement)
    except ValueError:                 # its record holds nothing (a bad record: failed)
        return None
    try:
        state.allocate(placement, truth)
    except ValueError as err:          # Slurm's count differs from the decision's: keep ours
        state.allocate(placement, held)
        log.warning("job %d: Slurm's GPUs %s do not fit its record (%s)", job.id,
                    truth.as_dict(), err)
        return None
    return truth


def apply_gres_truth(state: ClusterState, truth: Mapping[int, Mapping[str, list[int]]],
                     own: Mapping[int, JobRecord]) -> tuple[dict[str, int], dict[int, GpuGrant]]:
    """Make ``state`` (holding sluice's running jobs by their records) hold what Slurm
    says (``truth``: Slurm job id -> node -> indices; ``own``: Slurm id -> sluice's job).
    Returns the GPUs taken per node for other Slurm jobs, and per sluice job id the
    indices Slurm gave it."""
    grants: dict[int, GpuGrant] = {}
    for slurm_id, job in own.items():
        if slurm_id in truth:
            g = _own_truth(state, job, truth[slurm_id])
            if g is not None:
                grants[job.id] = g
    taken: dict[str, int] = {}
    for node, ids in foreign_gpu_indices(truth, set(own)).items():
        i = state.index.get(node)
        if i is None:
            continue
        free = [g for g in ids if g < state.capacity[i] and state.free_ids[i] >> g & 1]
        if len(free) < len(ids):
            log.warning("node %s: Slurm GPU(s) %s of other jobs are not free in sluice's "
                        "picture", node, sorted(set(ids) - set(free)))
        if free:
            state.allocate(Placement(f"slurm:{node}", (), (node,) * len(free)),
                           GpuGrant.of({node: free}))
            taken[node] = len(free)
    return taken, grants


def read_truth(client) -> dict[int, dict[str, list[int]]]:
    """Slurm's GPU indices of every job; {} when unreadable (the GPU counts of
    ``apply_capacity`` still hold then: nothing is double-booked, only not by index)."""
    from slurm_client import SlurmError

    try:
        return client.job_gpu_indices()
    except (SlurmError, ValueError) as err:     # ValueError: output sluice cannot read
        log.warning("Slurm's GPU indices unreadable: %s", err)
        return {}
