"""Liquid's resource-requirement estimator: a random forest from a job's parameters to
``<N x GPU, GMem, Bandwidth>``, trained on measured runs (never on the analytic model).

Training data (``data/measured_runs_h100.json``, written by
``bench/scheduler/measure_gpu_runs.py`` on one NVIDIA H100): 91 configurations, the 5 models the
runtime trains x input size 64/128/224 x batch size 1-256, each with its measured step
time, peak GPU memory and in-host exchange time (gradients to pinned host memory and
parameters back). That is all the measured data there is: one GPU type, five models.

Targets, per configuration (Liquid's triple):

* **GMem**: the measured peak GPU memory of a training step, GiB.
* **Bandwidth**: the per-worker bandwidth at which one push + pull of the float32
  parameters takes as long as the measured step, Gbit/s; below it a PS worker spends
  more time exchanging than computing.
* **N x GPU**: the GPU count at the point of diminishing returns (Liquid's "law of
  diminishing marginal utility"): the largest n <= ``MAX_N`` such that every added GPU
  up to n still adds at least ``MARGINAL`` of one GPU's throughput. Throughput on n
  GPUs of one host with the PS on its CPU is ``n * t / (t + n * x)`` (t the measured
  step, x the measured exchange: the n workers' exchanges share the host).
  Derived from two measurements by that rule, not measured at n GPUs: this project
  had one GPU.

Features: log10(parameters), batch size, input size (pixels), log10(pixels per batch). Five models is little:
the forest interpolates between measured configurations well (held-out rows) and
generalises to an unseen model poorly (leave-one-model-out); both are reported by
``evaluate`` and ``bench/scheduler/bench_resource_estimator.py``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data" / "measured_runs_h100.json"
MAX_N = 8                  # one 8-GPU server
MARGINAL = 0.5             # a GPU must add half a GPU's throughput to be worth it
DEFAULT_INPUT_SIZE = 224   # ImageNet-sized input, what the scenarios' datasets are
TARGETS = ("gpus", "gmem_gib", "bandwidth_gbps")


@dataclass(frozen=True)
class Requirement:
    gpus: float
    gmem_gib: float
    bandwidth_gbps: float

    @property
    def max_useful_gpus(self) -> int:
        return max(1, int(round(self.gpus)))


def load_runs(path: str | Path = DATA) -> list[dict]:
    return json.loads(Path(path).read_text())["runs"]


def throughput(n: int, step_s: float, exchange_s: float) -> float:
    """Samples/s of n workers relative to one: ``n*t / (t + n*x)``; 1 at n = 1 (a single
    GPU keeps its own parameters)."""
    if n <= 1:
        return 1.0
    return n * step_s / (step_s + n * exchange_s)


def diminishing_point(step_s: float, exchange_s: float) -> int:
    """The largest n <= ``MAX_N`` such that each GPU from 2 to n added >= ``MARGINAL``."""
    n = 1
    while n < MAX_N and throughput(n + 1, step_s, exchange_s) - throughput(n, step_s, exchange_s) >= MARGINAL:
        n += 1
    return n


def labels(run: dict) -> tuple[float, float, float]:
    bits = 2 * run["params"] * 4 * 8
    return (float(diminishing_point(run["step_s"], run["exchange_s"])),
            run["peak_mem_bytes"] / 2 ** 30,
            bits / run["step_s"] / 1e9)


def features(params: int, batch_size: int, input_size: int) -> list[float]:
    """log10 parameters, batch size, input size, and log10 of the pixels in a batch
    (activation memory and compute grow with it; explicit, because 91 rows are too few
    for the trees to find that product themselves)."""
    return [math.log10(max(params, 1)), float(batch_size), float(input_size),
            math.log10(batch_size * input_size ** 2)]


def dataset(runs: list[dict]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    X = np.array([features(r["params"], r["batch_size"], r["input_size"]) for r in runs])
    y = np.array([labels(r) for r in runs])
    return X, y, [r["model"] for r in runs]


class ResourceEstimator:
    """A scikit-learn random forest (one multi-output forest) over ``dataset``."""

    def __init__(self, n_estimators: int = 100, seed: int = 0):
        from sklearn.ensemble import RandomForestRegressor
        self.forest = RandomForestRegressor(n_estimators=n_estimators, random_state=seed,
                                            min_samples_leaf=1)

    # memory and bandwidth span three orders of magnitude: learnt in log space, so a
    # 20 GiB configuration does not drown the 0.1 GiB ones
    def fit_arrays(self, X: np.ndarray, y: np.ndarray) -> "ResourceEstimator":
        self.forest.fit(X, np.column_stack([y[:, 0], np.log(y[:, 1]), np.log(y[:, 2])]))
        return self

    def predict_arrays(self, X: np.ndarray) -> np.ndarray:
        p = self.forest.predict(X)
        return np.column_stack([p[:, 0], np.exp(p[:, 1]), np.exp(p[:, 2])])

    def predict(self, params: int, batch_size: int,
                input_size: int = DEFAULT_INPUT_SIZE) -> Requirement:
        g, m, b = self.predict_arrays(np.array([features(params, batch_size, input_size)]))[0]
        return Requirement(float(g), float(m), float(b))


def scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, tuple[float, float]]:
    """target -> (RMSE, R^2)."""
    from sklearn.metrics import mean_squared_error, r2_score
    return {t: (float(math.sqrt(mean_squared_error(y_true[:, i], y_pred[:, i]))),
                float(r2_score(y_true[:, i], y_pred[:, i])))
            for i, t in enumerate(TARGETS)}


def evaluate(runs: list[dict], holdout: float = 0.25, seed: int = 0) -> dict:
    """Held-out rows (a seeded random ``holdout`` fraction) and leave-one-model-out."""
    rng = np.random.default_rng(seed)
    X, y, models = dataset(runs)
    idx = rng.permutation(len(runs))
    k = max(1, int(round(holdout * len(runs))))
    test, train = idx[:k], idx[k:]
    est = ResourceEstimator(seed=seed).fit_arrays(X[train], y[train])
    out = {"rows": len(runs), "held_out": int(k),
           "random_holdout": scores(y[test], est.predict_arrays(X[test])), "per_model": {}}
    for m in sorted(set(models)):
        mask = np.array([mm == m for mm in models])
        est = ResourceEstimator(seed=seed).fit_arrays(X[~mask], y[~mask])
        out["per_model"][m] = scores(y[mask], est.predict_arrays(X[mask]))
    return out


@lru_cache(maxsize=1)
def default_estimator() -> ResourceEstimator:
    """The forest trained on all the shipped measured runs (cached; < 1 s)."""
    X, y, _ = dataset(load_runs())
    return ResourceEstimator().fit_arrays(X, y)
