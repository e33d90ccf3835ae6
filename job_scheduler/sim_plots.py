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

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, r in results.items():
        x = np.sort(np.asarray(r.jct))
        ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=name)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"JCT CDF — {title}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    written.append(out / "jct_cdf.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    names = list(results)
    values = [results[n].avg_jct for n in names]
    bars = ax.bar(names, values, color="tab:blue")
    ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.set_ylabel("average turnaround (s)")
    ax.set_title(f"Average JCT — {title}", fontsize=9)
    fig.tight_layout()
    written.append(out / "avg_jct.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    lyap = results.get("lyapunov")
    if lyap is not None and lyap.trace:
        t, q, z = (np.asarray(v) for v in zip(*lyap.trace))
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        ax.plot(t, q, label="Q (task queue)")
        ax.plot(t, z, label="Z (virtual queue)")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("seconds of single-GPU work")
        ax.set_title(f"Lyapunov queues — {title}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        written.append(out / "lyapunov_queues.png")
        fig.savefig(written[-1], dpi=120)
        plt.close(fig)
    return written
