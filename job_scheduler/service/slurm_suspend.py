"""Suspend and resume of a Slurm-run job (``SlurmExecutor.suspend``).

The checkpoint first, then the allocation: the request file in the job's checkpoint
directory (``ps_runtime.checkpoint.request_suspend``; the run directory is on a file
system the batch script shares) makes every worker stop after the batch in progress;
the batch script (``ps_runtime.slurm_job``) then writes ``suspended.json`` and exit
status 0, and only then is the Slurm job cancelled (``scancel``), its GPUs released.
Slurm's own warning (``--signal=B:USR1@N``) leads to the same files; the executor's
poll then reports the job 'suspended'. A resume is a new submission whose plan names
the checkpoint.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from job_scheduler.service.run_files import error_text, read_exit, read_json
from job_scheduler.service.store import JobRecord
from ps_runtime.slurm_plan import CHECKPOINT_DIR, PLAN_FILE, PS_LOG_DIR, SUSPENDED_FILE



def suspend(job: JobRecord, timeout: float, release: Callable[[], None]) -> dict:
    """Ask, wait for the checkpoint, then ``release`` the allocation (the executor's
    scancel and ports): {checkpoint, work_left, batch, batches, suspend_s}, or
    {finished: True} when its last batch came first. RuntimeError when it does not
    stop within ``timeout`` s or stops without a checkpoint (the caller stops it)."""
    from ps_runtime.checkpoint import request_suspend

    started = time.monotonic()
    run_dir = Path(job.run_dir)
    request_suspend(run_dir / CHECKPOINT_DIR)
    while read_exit(run_dir) is None:
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"no checkpoint within {timeout:g} s")
        time.sleep(0.1)
    release()                            # the checkpoint is on disk: release the GPUs
    stopped = suspended_at(run_dir)
    if stopped is not None:
        return {**stopped, "suspend_s": round(time.monotonic() - started, 3)}
    code = read_exit(run_dir)
    if code == 0:
        return {"finished": True}
    raise RuntimeError(f"it ended without a checkpoint: {error_text(run_dir, code)}")


def suspended_at(run_dir: Path) -> dict | None:
    """What the batch script of a suspended job left: {checkpoint, work_left, batch,
    batches}; None when it was not suspended."""
    got = read_json(Path(run_dir) / SUSPENDED_FILE)
    if not got or not got.get("checkpoint") or not got.get("batches"):
        return None
    return {"checkpoint": str(got["checkpoint"]), "batch": int(got["batch"]),
            "batches": int(got["batches"]),
            "work_left": round(1 - int(got["batch"]) / int(got["batches"]), 6)}


def resumed_batches(job: JobRecord, workers: int) -> int | None:
    """The last batch of a job resuming its checkpoint on ``workers`` workers: the same
    samples left, spread over them (``checkpoint.resized_last_batch``); None for a first
    start."""
    from ps_runtime.checkpoint import read_manifest, resized_last_batch

    checkpoint = (job.resume or {}).get("checkpoint")
    if not checkpoint:
        return None
    m = read_manifest(checkpoint)
    if m.workers == workers:
        return m.batches
    return resized_last_batch(m.batch, m.batches, m.workers, workers)


def progress(job: JobRecord) -> float | None:
    """The fraction of its batches a Slurm-run job has done (its workers' logs)."""
    from job_scheduler.service.suspending import logged_fraction

    run_dir = Path(job.run_dir or "/nonexistent")
    plan = read_json(run_dir / PLAN_FILE) or {}
    return logged_fraction(run_dir / PS_LOG_DIR, plan.get("batches"),
                           len(plan.get("workers") or ()))
