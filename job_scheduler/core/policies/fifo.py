"""``fifo``: head-of-line FIFO at the GPU count each job requests, first-fit placement
(the YARN-style baseline)."""

from __future__ import annotations

from job_scheduler.core.policies.base import FixedCountPolicy, PolicyOptions, requested_gpus


def make(o: PolicyOptions) -> FixedCountPolicy:
    return FixedCountPolicy("fifo", requested_gpus, o.placer("first-fit"))
