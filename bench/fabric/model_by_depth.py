"""The exchange model against the stored FIFO sweeps, depth by depth: per depth,
the measured mean JCT and the current model's (medians over seeds) and the model's error
(the median over seeds of the signed error), with ``--plot`` a PNG of both against the
FIFO's depth, one panel per sweep.

    .venv/bin/python -m bench.fabric.model_by_depth bench/results/priority-rules/sweep-fifo-0.7-bbr-per-seed.json [...] [--plot OUT.png]

A reading of stored results (``sluice calibrate fifo-depth``'s runs: the deep FIFO ``off`` and
``fifo-N`` for each swept depth): no fabric, a few seconds a sweep. The sweeps ran on
tuning seeds, so this chooses or checks a model's structure; it is not a verdict.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.fabric import model_by_bucket as mb
from mininet_tests.calibration.fifo_depth import DEEP, depths_registered


def depth_of(mode: str) -> int:
    """A sweep mode's FIFO depth in packets (``off`` is the deep FIFO)."""
    return DEEP if mode == "off" else int(mode.removeprefix("fifo-"))


def by_depth(path: str) -> tuple[dict, dict[int, dict]]:
    """(the sweep's summary, depth -> ``model_by_bucket.by_mode``'s row for it). The swept
    depths are baselines only while they are read."""
    per_seed, summary = mb.sources(path)
    modes = list(per_seed[0]["modes"])
    with depths_registered(depth_of(m) for m in modes if m != "off"):
        rows = mb.by_mode(per_seed, summary, modes)
    return summary, {depth_of(m): rows[m] for m in sorted(rows, key=depth_of)}


def table(label: str, rows: dict[int, dict]) -> list[str]:
    lines = [f"| {label}: FIFO (packets) | measured mean JCT (s) | model (s) | model error |",
             "|---:|---:|---:|---:|"]
    lines += [f"| {d} | {r['mean_jct_s']:.3f} | {r['predicted_mean_jct_s']:.3f} | "
              f"{r['model_error_pct']:+.1f} % |" for d, r in rows.items()]
    return lines


def label_of(summary: dict) -> str:
    return f"load {summary.get('load')}, {summary.get('host_cc') or 'machine'}"


def plot(sweeps: list[tuple[dict, dict[int, dict]]], out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sweeps), figsize=(4.2 * len(sweeps), 3.6), squeeze=False,
                             sharey=True)
    for ax, (summary, rows) in zip(axes[0], sweeps):
        depths = list(rows)
        ax.plot(depths, [r["mean_jct_s"] for r in rows.values()], "o-", label="measured")
        ax.plot(depths, [r["predicted_mean_jct_s"] for r in rows.values()], "s--",
                label="exchange model")
        ax.set_xscale("log")
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.set_xlabel("FIFO depth (packets per level)")
        ax.set_title(label_of(summary))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean JCT (s, median over seeds)")
    axes[0][0].legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="stored sweep *-per-seed.json (or --out directories)")
    ap.add_argument("--plot", type=Path, default=None, help="write a PNG of every sweep here")
    args = ap.parse_args(argv)
    sweeps = [by_depth(p) for p in args.paths]
    for path, (summary, rows) in zip(args.paths, sweeps):
        print(f"\n{path}\n")
        print("\n".join(table(label_of(summary), rows)))
    if args.plot:
        print(f"\nwrote {plot(sweeps, args.plot)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
