"""How the scheduler service suspends a job, and what it keeps of a suspended job.

A preemptive policy's ``Suspend`` (or the resource manager's own preemption, Slurm's
``--signal=USR1@N``) stops a running job with a checkpoint; it waits again, and its
next start (a resume, or a migration when it is started again in the same slot)
continues from that checkpoint. The job's ``resume`` record (store column) says from
what: the checkpoint's directory, the fraction of work it has left, the restore
seconds its next start pays in the policy's picture, how many times it was suspended,
and the measured cost of the last suspension (``suspend_s``: the ask until the
checkpoint is on disk and the GPUs are free; ``restart_s``: its resume's launch until
its first batch). Every suspension is also an event with those figures.
"""

from __future__ import annotations

import dataclasses
import logging
from contextlib import suppress
from pathlib import Path
from typing import Any

from job_scheduler.core.decisions import Suspend
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.service.gpu_records import recorded_placement
from job_scheduler.service.store import JobRecord

log = logging.getLogger("sluice.scheduler")

# what a running record holds only for its current run
_RUN_ONLY = ("trains_from", "run_s", "restart_s", "launched_at")


def resume_after(job: JobRecord, got: dict[str, Any], restore_s: float, why: str,
                 now: float) -> dict[str, Any]:
    """The job's ``resume`` record once suspended: ``got`` is what its executor
    reported (``work_left``, ``checkpoint``, ``suspend_s``)."""
    out = {k: v for k, v in (job.resume or {}).items() if k not in _RUN_ONLY}
    out.update(work_left=float(got.get("work_left", out.get("work_left", 1.0))),
               restore_s=float(restore_s), suspends=int(out.get("suspends", 0)) + 1,
               why=why, suspended_at=now, suspend_s=got.get("suspend_s"))
    if got.get("checkpoint"):
        out["checkpoint"] = str(got["checkpoint"])
    for key in ("batch", "batches"):      # where its checkpoint stopped, of how many
        if key in got:
            out[key] = int(got[key])
    return out


def suspend_detail(job: JobRecord, resume: dict[str, Any]) -> str:
    """The 'suspended' event's text: why, the cost, what it resumes from."""
    cost = resume.get("suspend_s")
    return (f"{resume['why']}: {resume['work_left']:.3f} of its work left"
            + (f", checkpoint {resume['checkpoint']}" if resume.get("checkpoint") else "")
            + (f", suspend_s={cost:.3f}" if cost is not None else "")
            + f", from {job.gpus_by_host()} GPUs {(job.placement or {}).get('gpu_ids')}")


def start_event(job: JobRecord, now: float) -> str:
    """A start's event kind: ``started``, ``resumed`` (from a checkpoint), or
    ``migrated`` (suspended and started again in the same slot)."""
    resume = job.resume or {}
    if not resume.get("suspends"):
        return "started"
    return "migrated" if resume.get("suspended_at") == now else "resumed"


def restart_event(job: JobRecord, learned: dict[str, Any]) -> tuple[str, str] | None:
    """A resumed job's first batch came (its executor learned ``restart_s``): the
    event recording the restart's cost, once."""
    new = (learned.get("resume") or {}).get("restart_s")
    if new is None or (job.resume or {}).get("restart_s") is not None:
        return None
    return "restarted", f"restart_s={new:.3f} (launch to first batch after the resume)"


def measured_progress(svc, running) -> dict:
    """``decide``'s keyword: the work left of each running job whose executor measures
    it (``progress``), for a preemptive policy (the others are shown no running job)."""
    if not getattr(svc.policy, "preemptive", False):
        return {}
    out = {}
    for job in running:
        measure = getattr(svc.executors.get(job.executor), "progress", None)
        done = measure(job) if measure is not None else None
        if done is not None:
            out[job.id] = 1.0 - done
    return {"progress": out}


def logged_fraction(ps_dir: Path, total: int | None, workers: int | None) -> float | None:
    """The fraction of its batches a PS job has done: the last batch every one of its
    ``workers`` logged (``ps_runtime`` worker logs) over its last batch ``total``."""
    from ps_runtime.launcher import parse_batches

    if not total or not workers:
        return None
    done = []
    for rank in range(workers):
        try:
            lines = (ps_dir / f"worker{rank}.log").read_text(errors="replace").splitlines()
        except OSError:
            return None
        done.append(max((r.batch for r in parse_batches(lines)), default=0))
    return min(done) / total


def carry_out(svc, step: Suspend, state: ClusterState, now: float, requeued: dict) -> None:
    """Carry out a Suspend: the executor stops the job with a checkpoint, its GPUs
    go free (in ``state`` too, for this slot's starts) and it waits again."""
    job = svc.store.get(step.job_id)
    if job is None or job.state != "running":
        log.error("policy suspended job %s which is not running; ignored", step.job_id)
        return
    executor = svc.executors[job.executor]
    try:
        got = executor.suspend(job, now)
    except Exception as err:   # no checkpoint: it resumes from its last one, if any
        log.error("job %d (%s): suspend failed: %s; stopped", job.id, job.name, err)
        executor.stop(job)
        got = {"failed": str(err)}
    with suppress(ValueError):
        state.release(recorded_placement(job)[0])
    svc.tell_controller_ended(job)
    if got.get("finished"):        # its last batch came first: it leaves the queue
        svc.store.update(job.id, expect_state="running", state="finished",
                         finished_at=svc.clock(), exit_code=0, event="finished",
                         detail="ended while being suspended")
        svc.policy.remove(job.id)
        return
    why = step.why if "failed" not in got else (
        f"{step.why}; the suspend failed ({got['failed']}): it resumes from its last "
        "checkpoint, or from the start")
    resume = resume_after(job, got, step.cost_s, why, now)
    # a resume is no new attempt (``max_retries`` counts failures, not suspensions)
    fields = {**requeued, "resume": resume, "attempts": max(0, job.attempts - 1)}
    if svc.store.update(job.id, expect_state="running", event="suspended",
                        detail=suspend_detail(job, resume), **fields):
        svc.requeue_suspended(dataclasses.replace(job, **fields), resume["work_left"])
    log.info("job %d (%s) suspended (%s)", job.id, job.name, step.why)
