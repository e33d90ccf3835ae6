"""``sluice demo``'s four-arm comparison: ``comparison.json``, ``comparison.md``
and the plot ``comparison.png``, from each arm's ``RealTimeRun.result()`` and the exchange
model's JCTs predicted before the passes. Pure apart from writing the plot.

``comparison.json``::

    {"seed": S, "wall_time_s": W, "workload": {...},
     "arms": {"a": {"title", "policy", "placement", "priority",
                    "avg_jct_s", "p95_jct_s", "makespan_s", "finished", "jobs_total",
                    "worst_prediction_error_pct",
                    "jobs": {NAME: {"jct_s", "predicted_jct_s", "racks", "gpus", "status"}}},
              "b": ..., ...}}

JCT = finish - arrival of a finished job; p95 = the 95th percentile of the arm's JCTs,
linear between order statistics (numpy's default); makespan = the last finish (seconds
from the pass's start, when the first job arrives). A job's prediction error is
|predicted - measured| / measured of its JCT. ``wall_time_s``: the whole command (draw,
dry runs, fabric, pool, every arm, teardown) less any wait for the fabric lock.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def p95(values: list[float]) -> float | None:
    xs = sorted(values)
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    x = 0.95 * (len(xs) - 1)
    k = int(x)
    return xs[k] + (x - k) * (xs[min(k + 1, len(xs) - 1)] - xs[k])


def _racks(topology, job: dict) -> list[str]:
    hosts = set(job.get("ps_hosts") or ()) | set(job.get("worker_hosts") or ())
    return sorted({topology.host_by_name[h].rack for h in hosts})


def arm_figures(topology, result: dict, predicted: dict[str, float]) -> dict:
    """One arm's entry of comparison.json (without its description)."""
    jobs, errors = {}, []
    for j in result["jobs"]:
        done = j.get("status") == "finished"
        jct = j.get("turnaround") if done else None
        pred = predicted.get(j["name"])
        jobs[j["name"]] = {"jct_s": jct, "predicted_jct_s": pred, "racks": _racks(topology, j),
                           "gpus": j.get("gpus"), "status": j.get("status")}
        if jct and pred is not None:
            errors.append(100 * abs(pred - jct) / jct)
    jcts = [v["jct_s"] for v in jobs.values() if v["jct_s"] is not None]
    return {"avg_jct_s": round(statistics.fmean(jcts), 3) if jcts else None,
            "p95_jct_s": round(p95(jcts), 3) if jcts else None,
            "makespan_s": result["summary"]["makespan_s"],
            "finished": len(jcts), "jobs_total": len(jobs),
            "worst_prediction_error_pct": round(max(errors), 1) if errors else None,
            "jobs": jobs}


def comparison(topo, arms, results: dict, predicted: dict, *, seed: int,
               wall_time_s: float, **extra) -> dict:
    """comparison.json's mapping: ``topo`` the fabric's Topology, ``arms`` the Arm objects
    run, ``results`` and ``predicted`` keyed by arm key; ``extra`` more top-level keys."""
    out = {"seed": seed, "wall_time_s": round(wall_time_s, 1), **extra, "arms": {}}
    for arm in arms:
        out["arms"][arm.key] = {"title": arm.title, "policy": arm.policy,
                                "placement": arm.placement or "the policy's own",
                                "priority": arm.priority,
                                "price_priority": arm.price_rule(extra.get("rank_rule")),
                                **arm_figures(topo, results[arm.key], predicted[arm.key])}
    return out


def _fmt(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def change_pct(base: float | None, other: float | None) -> float | None:
    return None if not base or other is None else round(100 * (other - base) / base, 1)


def markdown(cmp: dict) -> str:
    arms = cmp["arms"]
    lines = ["| arm | what | avg JCT s | p95 JCT s | makespan s | finished | worst prediction error % |",
             "|---|---|---|---|---|---|---|"]
    base = arms.get("a", {}).get("avg_jct_s")
    for key, a in arms.items():
        vs = change_pct(base, a["avg_jct_s"]) if key != "a" else None
        lines.append(f"| {key} | {a['title']} | {_fmt(a['avg_jct_s'])}"
                     + (f" ({vs:+.1f} % vs a)" if vs is not None else "")
                     + f" | {_fmt(a['p95_jct_s'])} | {_fmt(a['makespan_s'])} | "
                     f"{a['finished']}/{a['jobs_total']} | {_fmt(a['worst_prediction_error_pct'])} |")
    names = list(next(iter(arms.values()))["jobs"]) if arms else []
    lines += ["", "Per job: measured JCT s / predicted s / GPUs / racks, per arm.", "",
              "| job | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
    for n in names:
        cells = []
        for a in arms.values():
            j = a["jobs"].get(n, {})
            cells.append(f"{_fmt(j.get('jct_s'))} / {_fmt(j.get('predicted_jct_s'))} / "
                         f"{_fmt(j.get('gpus'), 0) if j.get('gpus') else '-'} / "
                         f"{','.join(j.get('racks') or []) or '-'}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(cmp: dict):
    """The four arms side by side: average and p95 JCT and makespan (bars), the average
    the exchange model predicted (markers)."""
    arms = cmp["arms"]
    keys = list(arms)
    fig, ax = plt.subplots(figsize=(7.5, 4))
    width = 0.27
    for k, (field, label, color) in enumerate((("avg_jct_s", "average JCT", "#3b75af"),
                                               ("p95_jct_s", "p95 JCT", "#9ecae1"),
                                               ("makespan_s", "makespan", "#bbbbbb"))):
        xs = [i + (k - 1) * width for i in range(len(keys))]
        ax.bar(xs, [arms[a][field] or 0.0 for a in keys], width, color=color, label=label)
    pred = [(i - width, statistics.fmean(v)) for i, a in enumerate(keys)
            if (v := [j["predicted_jct_s"] for j in arms[a]["jobs"].values()
                      if j["predicted_jct_s"] is not None])]
    if pred:
        ax.scatter(*zip(*pred), marker="_", s=300, linewidths=2.5, color="#d62728", zorder=3,
                   label="average JCT predicted")
    ax.set_xticks(range(len(keys)), [f"{a}\n{'priority' if arms[a]['priority'] else 'FIFO net'}, "
                                     f"{arms[a]['policy']}" for a in keys])
    ax.set_ylabel("seconds")
    ax.set_title(f"sluice demo: {len(keys)} arms, one workload (seed {cmp['seed']})")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def write_plot(cmp: dict, path: str | Path) -> Path:
    from end_to_end.report import save_figure

    return save_figure(plot(cmp), path)
