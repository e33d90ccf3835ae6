"""The GPU indices of a running job as the service's store records them, read back.

A start records its decision's placement (``StartDecision.placement_record``) with
``gpu_ids`` ``{host: [index, ...]}``; after a restart the service rebuilds which GPUs
are free from those records (``Scheduler.cluster_state``), so no index is handed out
twice. A record that names an index its host does not have (a store carried to
another topology, or edited by hand), or GPUs another running job's record already
holds, is bad input: that job alone fails with an error naming the host and the index,
and is requeued by the retry policy; the others keep theirs. A record from before indices were stored has none: it gets the lowest free.
Pure.
"""

from __future__ import annotations

from collections import Counter

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.service.store import JobRecord
from sluice_common.placement import GpuGrant, GpuIndexError, Placement


def recorded_placement(job: JobRecord) -> tuple[Placement, GpuGrant | None]:
    """The placement (named by the job's id) and GPU indices its record holds;
    ValueError when the indices are not a ``{host: [index, ...]}`` of whole numbers."""
    record = job.placement or {}
    placement = Placement(str(job.id), tuple(record.get("ps_hosts", ())),
                          tuple(record.get("worker_hosts", ())))
    ids = record.get("gpu_ids")
    if ids is None:
        return placement, None
    if not isinstance(ids, dict) or not all(isinstance(v, list) for v in ids.values()):
        raise ValueError(f"job {job.id}: gpu_ids must map host -> [index, ...], got {ids!r}")
    return placement, GpuGrant.of(ids)


def gpu_record_problem(job: JobRecord, capacities: dict[str, int]) -> str | None:
    """Why job's recorded GPU indices cannot be held on this cluster, or None."""
    try:
        placement, grant = recorded_placement(job)
        if grant is not None:
            grant.check(capacities, f"{job.id} ({job.name})")
            # one index per worker on each host: anything else cannot be held, and held
            # anyway it made every slot fail (the whole service), not this job alone
            named = dict(grant.by_host)
            for host, k in Counter(placement.worker_hosts).items():
                if len(named.get(host, ())) != k:
                    return (f"recorded GPU indices {list(named.get(host, ()))} on {host} "
                            f"for its {k} worker(s) there")
    except GpuIndexError as err:
        return f"recorded GPU index is not on its host: {err}"
    except ValueError as err:
        return f"recorded GPU indices unreadable: {err}"
    return None


def held_state(topology, running: list[JobRecord], capacities: dict[str, int]
               ) -> tuple[ClusterState, dict[int, str]]:
    """The cluster with every running job's recorded GPUs held, and why each job that
    could not be held (bad indices, or GPUs an earlier job's record holds) was not:
    ``{job id: problem}``. Such a job holds nothing, so one bad record never stops a
    slot: it fails alone (``Scheduler._reap``)."""
    state, problems = ClusterState(topology), {}
    for job in running:
        problem = gpu_record_problem(job, capacities)
        if problem is None:
            try:
                state.allocate(*recorded_placement(job))
            except ValueError as err:
                problem = f"its recorded GPUs cannot be held beside the other running jobs': {err}"
        if problem is not None:
            problems[job.id] = problem
    return state, problems
