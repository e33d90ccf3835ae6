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
  mean 10 s inside a burst; bursts start at exponential gaps, scaled so that the
  offered load (requested GPU-seconds / the span of arrivals / cluster GPUs) is exactly
  ``load``: ``bursty-moderate`` 0.7 and ``bursty-heavy`` 1.0 on ``gpus`` = 16
  (two-rack);
- 200 jobs by default; job rows follow the Tiresias rule (batch 32, 1 epoch,
  dataset_size = duration x 32 x GPUs, i.e. one nominal iteration a second; the
  estimator re-derives the work from the duration).
"""

from __future__ import annotations

import math
import random

from sluice_common.jobspec import JobSpec
from sluice_common.errors import InputError

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


def generate_bursty(name: str, jobs: int | None = None, seed: int = 0) -> list[JobSpec]:
    if name not in BURSTY:
        raise InputError(name, f"unknown bursty trace (known: {', '.join(BURSTY)})")
    load = BURSTY[name]
    count = BURSTY_JOBS if jobs is None else jobs
    rng = random.Random(f"{name}/{seed}")
    rows = []                  # (burst start on a unit-mean clock, offset in the burst, g, d)
    start = 0.0
    while len(rows) < count:
        size = 1
        while rng.random() > 1.0 / MEAN_BURST:          # geometric, mean MEAN_BURST
            size += 1
        offset = 0.0
        for _ in range(min(size, count - len(rows))):
            g = rng.choices([g for g, _ in GPU_MIX], [p for _, p in GPU_MIX])[0]
            d = min(max(rng.lognormvariate(math.log(MEDIAN_S), SIGMA), CLIP_S[0]), CLIP_S[1])
            rows.append((start, offset, g, round(d, 1)))
            offset += rng.expovariate(1.0 / BURST_GAP_S)
        start += rng.expovariate(1.0)
    # Heavy tails make the offered load of 200 jobs vary a lot around its mean, so the
    # burst clock is scaled to give exactly ``load``: span = requested GPU-seconds /
    # (load x gpus). Bursts may then overlap (a heavier burst).
    work = sum(g * d for _, _, g, d in rows)
    span = work / (load * BURSTY_GPUS)
    last_start = max(r[0] for r in rows) or 1.0
    scale = max(span - rows[-1][1], 0.0) / last_start
    out = []
    for i, (st, off, g, d) in enumerate(rows):
        out.append(JobSpec(
            name=f"{name}-{i:03d}", model=rng.choice(MODELS),
            dataset_size=max(1, round(d)) * BATCH * g, epochs=1, batch_size=BATCH,
            max_gpus=g, arrival=round(st * scale + off, 3), trace_gpus=g, trace_duration=d,
            extra={"trace": name}))
    return sorted(out, key=lambda j: j.arrival)
