"""The names the Slurm executor gives Slurm jobs (pure)."""

from __future__ import annotations

import zlib
from pathlib import Path

from job_scheduler.service.store import JobRecord

NAME_PREFIX = "sluice-"


def slurm_job_name(job: JobRecord, tag: str = "") -> str:
    """``sluice-<tag>-<run dir>`` (``sluice-1a2b3c4d-job-7-attempt-1``): one name per
    submission. ``tag`` names the job store (two stores, or a store made afresh, number
    their jobs from 1 again, and Slurm remembers jobs for MinJobAge: a name must never
    mean another store's job); the run directory is recorded before the submission."""
    return f"{NAME_PREFIX}{tag + '-' if tag else ''}{Path(job.run_dir).name}"


def store_tag(db_path: str | Path) -> str:
    """A short stable name of a job store (its absolute path)."""
    return f"{zlib.crc32(str(Path(db_path).resolve()).encode()):08x}"
