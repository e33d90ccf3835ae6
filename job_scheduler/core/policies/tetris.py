"""``tetris``: packing with backfill (arrival order, jobs that do not fit are skipped) at
the requested GPU count, Tetris cosine-similarity placement."""

from __future__ import annotations

from job_scheduler.core.policies.base import FixedCountPolicy, PolicyOptions, requested_gpus


def make(o: PolicyOptions) -> FixedCountPolicy:
    return FixedCountPolicy("tetris", requested_gpus, o.placer("tetris"), backfill=True)
