"""``single``: head-of-line FIFO, every job on one GPU, Liquid best-fit placement
(Proteus' single-GPU baseline)."""

from __future__ import annotations

from job_scheduler.core.policies.base import FixedCountPolicy, PolicyOptions


def make(o: PolicyOptions) -> FixedCountPolicy:
    return FixedCountPolicy("single", lambda job: 1, o.placer("best-fit"))
