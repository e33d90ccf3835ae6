"""Liquid's resource estimator on the measured runs: RMSE and R^2 on held-out runs.

Two splits of the 91 measured H100 configurations (job_scheduler/core/data/measured_runs_h100.json):
a seeded random 25 % of the rows held out (interpolation between measured
configurations), and leave-one-model-out (a model the forest has never seen). Also
the forest's <N x GPU, GMem, Bandwidth> for the models of examples/jobs/mixed.yaml.

    .venv/bin/python -m bench.scheduler.bench_resource_estimator [--plot bench/plots/resource_estimator.png]
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from sluice_common.models import MODELS
from job_scheduler.core.resource_estimator import (TARGETS, ResourceEstimator, dataset,
                                                   default_estimator, evaluate, load_runs)

from bench import harness


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    runs = load_runs()
    ev = evaluate(runs)
    print(f"{ev['rows']} measured runs, {len(set(r['model'] for r in runs))} models; "
          f"random hold-out of {ev['held_out']} rows")
    print("| split | " + " | ".join(f"{t} RMSE | {t} R^2" for t in TARGETS) + " |")
    print("|---|" + "---:|" * (2 * len(TARGETS)))

    def row(label, sc):
        print(f"| {label} | " + " | ".join(f"{sc[t][0]:.2f} | {sc[t][1]:.2f}" for t in TARGETS)
              + " |")
    row("random 25 % held out", ev["random_holdout"])
    for m, sc in ev["per_model"].items():
        row(f"{m} held out (never seen)", sc)
    est = default_estimator()
    print("\nforest trained on every run; jobs at 224 px input:")
    for m, b in (("resnet18", 64), ("resnet50", 32), ("vgg16", 32), ("alexnet", 128),
                 ("googlenet", 32), ("inception_v3", 32)):
        r = est.predict(MODELS[m].params, b)
        print(f"  {m:<13} b={b:<4} N x GPU {r.gpus:4.1f}  GMem {r.gmem_gib:5.1f} GiB  "
              f"bandwidth {r.bandwidth_gbps:6.0f} Gbit/s")
    if args.plot:
        plot(runs, Path(args.plot))
    print(f"total {time.perf_counter() - t0:.1f} s")
    return 0


def plot(runs, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    X, y, _ = dataset(runs)
    idx = np.random.default_rng(0).permutation(len(runs))
    k = int(round(0.25 * len(runs)))
    est = ResourceEstimator().fit_arrays(X[idx[k:]], y[idx[k:]])
    pred = est.predict_arrays(X[idx[:k]])
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    for i, (ax, t) in enumerate(zip(axes, TARGETS)):
        ax.scatter(y[idx[:k], i], pred[:, i], s=14)
        lo, hi = min(y[:, i].min(), pred[:, i].min()), max(y[:, i].max(), pred[:, i].max())
        ax.plot([lo, hi], [lo, hi], "k--", lw=1)
        ax.set_xlabel(f"measured {t}")
        ax.set_ylabel(f"predicted {t}")
        if t != "gpus":
            ax.set_xscale("log")
            ax.set_yscale("log")
    fig.suptitle("resource estimator on held-out H100 runs (random 25 %)", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
