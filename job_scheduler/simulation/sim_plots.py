"""PNG plots of simulator results (matplotlib, Agg backend): JCT CDF per policy,
average turnaround per policy, and the Lyapunov queues Q/Z over time."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def write_plots(results: Mapping[str, object], out_dir: str | Path, title: str = "") -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def save(fig, ax, name: str, heading: str, ylabel: str, xlabel: str | None = None,
             legend: bool = True) -> None:
        if xlabel:
            ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{heading} — {title}", fontsize=9)
        if legend:
            ax.grid(alpha=0.3)
            ax.legend()
        fig.tight_layout()
        written.append(out / name)
        fig.savefig(written[-1], dpi=120)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, r in results.items():
        x = np.sort(np.asarray(r.jct))
        ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=name)
    ax.set_xscale("log")
    save(fig, ax, "jct_cdf.png", "JCT CDF", "fraction of jobs",
         "job completion time (s, log scale)")

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    names = list(results)
    bars = ax.bar(names, [results[n].avg_jct for n in names], color="tab:blue")
    ax.bar_label(bars, fmt="%.0f", fontsize=8)
    save(fig, ax, "avg_jct.png", "Average JCT", "average turnaround (s)", legend=False)

    lyap = results.get("lyapunov")
    if lyap is not None and lyap.trace:
        t, q, z = (np.asarray(v) for v in zip(*lyap.trace))
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        ax.plot(t, q, label="Q (task queue)")
        ax.plot(t, z, label="Z (virtual queue)")
        save(fig, ax, "lyapunov_queues.png", "Lyapunov queues", "seconds of single-GPU work",
             "time (s)")
    return written
