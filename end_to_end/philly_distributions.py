"""The Philly trace's distributions the demo draws its workload from, as a small YAML file
the repository carries (``end_to_end/data/philly_distributions.yaml``; the trace itself is
82,248 rows and stays outside the repository).

    python -m end_to_end.philly_distributions_cli PHILLY.csv [--out FILE]

What is kept (``distributions(jobs)``, pure):

- ``gpu_counts``: how many jobs asked for each GPU count;
- ``durations``: per GPU-count class (1, 2, 4, 8 = eight or more), the duration quantiles
  at 0, 1, ..., 100 % (seconds): a job's length depends on its size in Philly (a 4-GPU
  job's median is 15x a 1-GPU job's), so the two are drawn together;
- ``all_durations``: the same quantiles over every job (the range the demo's time scale
  maps from);
- ``interarrivals``: the quantiles of the gaps between consecutive submissions (seconds).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "philly_distributions.yaml"
GPU_CLASSES = (1, 2, 4, 8)          # 8: eight GPUs or more (the demo caps counts at 8)
PERCENTS = tuple(range(101))


def gpu_class(gpus: int) -> int:
    """The duration class of a GPU count: the largest class <= gpus."""
    return max(c for c in GPU_CLASSES if c <= gpus)


def quantiles(values: list[float]) -> list[float]:
    """The values at 0, 1, ..., 100 % (nearest rank, rounded to 0.1 s)."""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    return [round(xs[round(p / 100 * (len(xs) - 1))], 1) for p in PERCENTS]


def distributions(jobs: list[tuple[float, int, float]]) -> dict:
    """``jobs`` = [(submit time s, GPUs, duration s)] -> the file's mapping."""
    arrivals = sorted(t for t, _, _ in jobs)
    by_class: dict[int, list[float]] = {c: [] for c in GPU_CLASSES}
    for _, gpus, duration in jobs:
        by_class[gpu_class(gpus)].append(duration)
    return {
        "gpu_counts": dict(sorted(Counter(g for _, g, _ in jobs).items())),
        "durations": {c: quantiles(d) for c, d in by_class.items()},
        "all_durations": quantiles([d for _, _, d in jobs]),
        "interarrivals": quantiles([b - a for a, b in zip(arrivals, arrivals[1:])]),
    }
