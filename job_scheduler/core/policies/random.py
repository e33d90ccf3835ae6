"""``random``: head-of-line FIFO, a GPU count drawn uniformly in [1, max_gpus] per job
(seeded), Liquid best-fit placement (Proteus' random baseline)."""

from __future__ import annotations

import random
from typing import Callable

from job_scheduler.core.policies.base import FixedCountPolicy, PolicyOptions
from sluice_common.jobspec import JobSpec


def random_count(seed: int) -> Callable[[JobSpec], int]:
    rng = random.Random(seed)
    # drawn once per job, in arrival order (on_arrival), so a seed fixes the counts
    return lambda job: rng.randint(1, max(job.max_gpus, 1))


def make(o: PolicyOptions) -> FixedCountPolicy:
    return FixedCountPolicy("random", random_count(o.seed), o.placer("best-fit"), clamp=True)
