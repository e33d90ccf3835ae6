"""The soak's analysis (``bench/reliability/soak.py``): its records per time window,
memory growth after the warm-up, the ramp's steps and where a server falls behind, each
half's summary, and the plot. Pure but for the plot's file."""

from __future__ import annotations

import statistics
from pathlib import Path

WINDOW_S = 10.0
P99_LIMIT_MS = 50.0


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


def windows(records, seconds: float, rss: list[tuple[float, float]]) -> list[dict]:
    out = []
    k = 0
    while k * WINDOW_S < seconds - 1e-9:
        lo, hi = k * WINDOW_S, min(seconds, (k + 1) * WINDOW_S)
        rs = [r for r in records if lo <= r[0] < hi]
        lat = [r[1] for r in rs if r[2]]
        mem = [m for t, m in rss if lo <= t < hi]
        out.append({"t_s": hi, "answered_per_s": round(len(lat) / (hi - lo), 1),
                    "errors": sum(1 for r in rs if not r[2]),
                    "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99),
                    "rss_mb": round(max(mem), 1) if mem else None})
        k += 1
    return out


def growth_pct(rss: list[tuple[float, float]], warmup_s: float) -> float | None:
    after = [m for t, m in rss if t >= warmup_s]
    if len(after) < 2:
        return None
    base = statistics.median(after[:3])
    end = statistics.median(after[-3:])
    return round(100 * (end - base) / base, 2)


def falls_behind(step: dict) -> bool:
    return (step["answered_per_s"] < 0.95 * step["offered_per_s"] or step["unsent"] > 0
            or (step["p99_ms"] or 1e9) > P99_LIMIT_MS)


def ramp_point(steps: list[dict]) -> float | None:
    """The lowest offered rate at which it falls behind (None: it kept up with all)."""
    return min((s["offered_per_s"] for s in steps if falls_behind(s)), default=None)


def summarize_steps(phase_records, late_ms: float = 1000.0) -> list[dict]:
    """Ramp step -> offered, answered in time per second, p50/p99."""
    steps = []
    for rate, records, unsent, seconds in phase_records:
        ok = [r[1] for r in records if r[2] and r[1] < late_ms]
        steps.append({"offered_per_s": rate, "answered_per_s": round(len(ok) / seconds, 1),
                      "p50_ms": pct([r[1] for r in records if r[2]], 0.5),
                      "p99_ms": pct([r[1] for r in records if r[2]], 0.99),
                      "errors": sum(1 for r in records if not r[2]), "unsent": unsent})
    return steps


def side_summary(soak, ramp, seconds: float, rss: list[tuple[float, float]],
                 warmup_s: float, offered_per_s: float) -> dict:
    """One server's half of the soak: ``soak`` (rate, records, unsent, seconds) at the
    soak rate, then the ramp's steps; the rest of its entry the caller adds."""
    records = soak[1]
    ok = [r for r in records if r[2]]
    # the soak rate is the first step: a server behind at that rate is behind there
    steps = summarize_steps([soak] + list(ramp))
    return {"offered_per_s": offered_per_s,
            "answered_per_s": round(len(ok) / seconds, 1),
            "p50_ms": pct([r[1] for r in ok], 0.5), "p99_ms": pct([r[1] for r in ok], 0.99),
            "errors": len(records) - len(ok), "unsent": soak[2],
            "rss_growth_pct_after_warmup": growth_pct(rss, warmup_s),
            "windows": windows(records, seconds, rss), "ramp": steps[1:],
            "falls_behind_at_per_s": ramp_point(steps)}


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    for col, name in enumerate(("controller", "scheduler")):
        w = result[name]["windows"]
        t = [x["t_s"] / 60 for x in w]
        ax = axes[0][col]
        ax.plot(t, [x["p50_ms"] for x in w], label="p50")
        ax.plot(t, [x["p99_ms"] for x in w], label="p99")
        ax.axhline(P99_LIMIT_MS, color="#cc4444", lw=0.8, ls="--", label="50 ms")
        ax.set_title(f"{name}: {result[name]['offered_per_s']:g} requests/s offered")
        ax.set_ylabel("latency (ms)")
        ax.legend(fontsize=8)
        ax = axes[1][col]
        ax.plot(t, [x["rss_mb"] for x in w], color="#555555")
        ax.set_ylabel("RSS (MB)")
        ax.set_xlabel("minutes")
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
