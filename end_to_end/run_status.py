"""The live status line of ``sluice run``/``sluice demo``: jobs queued/running/done,
elapsed time and an ETA from C(n) (pure functions; the run loop feeds them its state)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class RunningJob:
    started: float        # seconds since the run began
    c_n_s: float          # C(n) estimated when it started
    batches: int          # per worker
    done_batches: int     # the slowest worker's last finished batch


def remaining_s(job: RunningJob, now: float) -> float:
    """Measured rate once batches are done, C(n) before that."""
    elapsed = max(now - job.started, 0.0)
    if job.done_batches > 0:
        return elapsed * (job.batches - job.done_batches) / job.done_batches
    return max(job.c_n_s - elapsed, 0.0)


def eta_s(now: float, running: Sequence[RunningJob], waiting_c_n: Sequence[float],
          parallel: int) -> float:
    """Seconds until every job is done: the longest running job, then the waiting jobs'
    C(n) spread over ``parallel`` jobs at a time (a rough bound, said as such)."""
    longest = max((remaining_s(j, now) for j in running), default=0.0)
    return longest + sum(waiting_c_n) / max(parallel, 1)


def status_line(now: float, pending: int, queued: int, running: Sequence[RunningJob],
                done: int, total: int, eta: float) -> str:
    def clock(s: float) -> str:
        s = int(s)
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 \
            else f"{s // 60}:{s % 60:02d}"
    return (f"jobs: {done}/{total} done, {len(running)} running, {queued} queued, "
            f"{pending} not arrived | elapsed {clock(now)} | ETA ~{clock(eta)} (from C(n))")


def slowest_batch(r) -> int | None:
    """The last batch every worker of running job r has done (None: not all have one)."""
    last: dict[int, int] = {}
    for it in r.iterations:
        last[it.worker] = max(last.get(it.worker, 0), it.batch)
    return min(last.values()) if len(last) == len(r.followers) else None
