"""The heavy-tailed job mix of the priority experiment (pure, seeded).

- batches per job: bounded Pareto, shape ``alpha`` (1.1), on ``[lo, hi]`` (10..1000
  times ``scale``, so that one seed fits the time budget);
- bytes per batch: log-uniform over one decade ``[bytes_lo, 10 * bytes_lo]``;
- compute per batch: either ``compute_s`` for every job (a device profile's time for the
  model: communication-dominated jobs, as large models on fast GPUs are; the share
  ``f = exchange / (exchange + compute)`` follows), or, when ``compute_s`` is None, a
  communication share of an iteration uniform in ``comm`` and
  ``compute = exchange * (1 - f) / f``; ``exchange = 2 * bytes / capacity`` (push, then
  pull, at the full link rate);
- arrivals: Poisson (exponential gaps) whose rate makes the offered load on the
  bottleneck ``load``: offered bytes/s over the bottleneck divided by its capacity,
  ``rate * mean(bytes per job per direction) / capacity`` (a network priority scheme
  acts on the link, so load is the link's, not the GPUs'). The gaps are rescaled to that
  mean exactly, so every seed offers the same load.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class MixJob:
    name: str
    arrival: float
    batches: int
    bytes_per_batch: int
    comm_fraction: float
    compute_s: float


def bounded_pareto(u: float, alpha: float, lo: float, hi: float) -> float:
    """Inverse CDF of the bounded Pareto distribution on [lo, hi] at ``u`` in [0, 1)."""
    ratio = (lo / hi) ** alpha
    return lo / (1.0 - u * (1.0 - ratio)) ** (1.0 / alpha)


def heavy_tail_mix(seed: int, load: float, capacity_bytes_s: float, jobs: int = 12,
                   alpha: float = 1.1, scale: float = 0.1, bytes_lo: int = 60_000,
                   comm: tuple[float, float] = (0.3, 0.7),
                   compute_s: float | None = None) -> list[MixJob]:
    if not 0 < load < 1:
        raise ValueError(f"load must be in (0, 1), got {load}")
    if jobs < 1 or scale <= 0 or bytes_lo <= 0:
        raise ValueError("jobs, scale and bytes_lo must be positive")
    if compute_s is not None and compute_s < 0:
        raise ValueError(f"compute_s must be >= 0, got {compute_s}")
    rng = random.Random(seed)
    lo, hi = 10 * scale, 1000 * scale
    raw = []
    for i in range(jobs):
        batches = max(1, round(bounded_pareto(rng.random(), alpha, lo, hi)))
        bpb = int(bytes_lo * 10 ** rng.random()) // 4 * 4
        f = rng.uniform(*comm)     # drawn in both modes: a seed gives the same sizes
        exchange = 2 * bpb / capacity_bytes_s
        if compute_s is None:
            compute = exchange * (1 - f) / f
        else:
            compute, f = compute_s, exchange / (exchange + compute_s)
        gap = rng.expovariate(1.0)
        raw.append((batches, bpb, f, compute, gap))
    mean_bytes = sum(b * bpb for b, bpb, *_ in raw) / jobs
    mean_gap = mean_bytes / (load * capacity_bytes_s)
    gaps = [r[4] for r in raw]
    norm = mean_gap / (sum(gaps) / jobs)
    out, t = [], 0.0
    for i, (batches, bpb, f, compute, gap) in enumerate(raw):
        out.append(MixJob(f"ht{i:02d}", round(t, 2), batches, bpb, round(f, 3),
                          round(compute, 4)))
        t += gap * norm
    return out


def offered_load(jobs: list[MixJob], capacity_bytes_s: float) -> float:
    """Bytes per direction over the arrival span (mean gap times the number of jobs)."""
    if len(jobs) < 2:
        return math.nan
    span = jobs[-1].arrival * len(jobs) / (len(jobs) - 1)
    return sum(j.batches * j.bytes_per_batch for j in jobs) / (capacity_bytes_s * span)
