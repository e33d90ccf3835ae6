"""Bursty synthetic traces: trace-shaped jobs (a requested GPU count and a duration
measured at it, like the Tiresias and Philly traces) arriving in bursts.

Why: the Proteus scenarios are not traces (no requested count, no duration) and the two
public traces are either light (Tiresias-60: the cluster rarely queues) or one fixed
history (Philly). Ordering, preemption and GPU-count pricing matter most when bursts
build queues of jobs of very different lengths; these traces do that on purpose.

The generator (all numbers ours, fixed, seeded; ``generate_bursty``):

- GPU count requested: 1, 2, 4 or 8 with probability 0.5 / 0.2 / 0.2 / 0.1 (most jobs
  small, as in Philly);
- duration at that count: log-normal, median 600 s, sigma 1.2 (heavy tail: mean
  ~1,230 s, 1 % beyond ~10,000 s), clipped to [60 s, 36,000 s];
- model: uniformly VGG16, AlexNet, GoogLeNet, ResNet18, ResNet50;
- arrivals: bursts of a geometric number of jobs (mean 10) with exponential gaps of
  mean 10 s inside a burst; bursts start at exponential gaps chosen so that the
  offered load (requested GPU-seconds per second / cluster GPUs) is ``load``:
  ``bursty-moderate`` 0.7 and ``bursty-heavy`` 1.0 on ``gpus`` = 16 (two-rack);
- 200 jobs by default; job rows follow the Tiresias rule (batch 32, 1 epoch,
  dataset_size = duration x 32 x GPUs, i.e. one nominal iteration a second; the
  estimator re-derives the work from the duration).
"""

from __future__ import annotations

import math
import random

from job_scheduler.jobspec import JobSpec
from sluice.errors import InputError

BURSTY = {"bursty-moderate": 0.7, "bursty-heavy": 1.0}
BURSTY_JOBS = 200
BURSTY_GPUS = 16
GPU_MIX = ((1, 0.5), (2, 0.2), (4, 0.2), (8, 0.1))
MEDIAN_S, SIGMA = 600.0, 1.2
CLIP_S = (60.0, 36_000.0)
MODELS = ("vgg16", "alexnet", "googlenet", "resnet18", "resnet50")
MEAN_BURST = 10
BURST_GAP_S = 10.0
BATCH = 32


def _mean_gpu_seconds() -> float:
    mean_gpus = sum(g * p for g, p in GPU_MIX)
    return mean_gpus * MEDIAN_S * math.exp(SIGMA ** 2 / 2)


def generate_bursty(name: str, jobs: int | None = None, seed: int = 0,
                    gpus: int = BURSTY_GPUS) -> list[JobSpec]:
    if name not in BURSTY:
        raise InputError(name, f"unknown bursty trace (known: {', '.join(BURSTY)})")
    load = BURSTY[name]
    count = BURSTY_JOBS if jobs is None else jobs
    rng = random.Random(f"{name}/{seed}")
    rate = load * gpus / _mean_gpu_seconds()            # jobs per second, long run
    mean_burst_gap = MEAN_BURST / rate
    out: list[JobSpec] = []
    t = 0.0
    while len(out) < count:
        size = 1
        while rng.random() > 1.0 / MEAN_BURST:          # geometric, mean MEAN_BURST
            size += 1
        s = t
        for _ in range(min(size, count - len(out))):
            g = rng.choices([g for g, _ in GPU_MIX], [p for _, p in GPU_MIX])[0]
            d = min(max(rng.lognormvariate(math.log(MEDIAN_S), SIGMA), CLIP_S[0]), CLIP_S[1])
            d = round(d, 1)
            i = len(out)
            out.append(JobSpec(
                name=f"{name}-{i:03d}", model=rng.choice(MODELS),
                dataset_size=max(1, round(d)) * BATCH * g, epochs=1, batch_size=BATCH,
                max_gpus=g, arrival=round(s, 3), trace_gpus=g, trace_duration=d,
                extra={"trace": name}))
            s += rng.expovariate(1.0 / BURST_GAP_S)
        t += rng.expovariate(1.0 / mean_burst_gap)
        t = max(t, s)
    return sorted(out, key=lambda j: j.arrival)
