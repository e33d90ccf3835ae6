"""The report of one ``sluice run`` (and the off-vs-on comparison of ``sluice demo``),
from ``RealTimeRun.result()`` (an ``end_to_end.result.RunResult``): ``report.json``
(everything), ``report.md`` (tables) and PNG plots (matplotlib, Agg). Pure apart from
writing files.

Definitions used in every table:
- turnaround (JCT) = finish - arrival; wait = start - arrival (seconds of the run);
- mean iteration = mean of the workers' per-batch times (compute + push + pull);
- bottleneck link = the switch<->switch link with the highest mean utilisation;
- lagging job = the job with the largest mean iteration time in the priority-off run
  (the straggler), unless the caller names one (the priority experiment names the job
  it made lag by its late arrival).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from end_to_end.result import RunResult, bw_text, iterations_of  # noqa: E402

PLOTS = ("turnaround.png", "iterations.png", "bottleneck.png")


def bottleneck_link(result: RunResult) -> str | None:
    samples = result.get("links") or []
    candidates = result.get("uplinks") or sorted({k for s in samples for k in s["util"]})
    if not samples or not candidates:
        return None
    def mean_util(link: str) -> float:
        return statistics.fmean(s["util"].get(link, 0.0) for s in samples)
    return max(candidates, key=lambda l: (mean_util(l), l))


def lagging_job(result: RunResult) -> str | None:
    """The finished job with the largest mean iteration time (ties: name)."""
    jobs = [j for j in result.get("jobs") or [] if j.get("mean_iteration_s") is not None]
    return max(jobs, key=lambda j: (j["mean_iteration_s"], j["name"]), default={"name": None})["name"]


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown(result: RunResult) -> str:
    s = result["summary"]
    lines = [f"# sluice run: {result['topology']}, policy {result['policy']}, priority "
             f"{'on' if result['priority'] else 'off'}, {result.get('compute', 'torch')} compute", "",
             f"Device: {result.get('device', '-')}; profile: {result.get('profile', '-')}.", "",
             f"{s['finished']}/{s['jobs']} jobs finished; average JCT {_fmt(s['avg_jct_s'])} s; "
             f"makespan {_fmt(s['makespan_s'])} s; bottleneck link {bottleneck_link(result) or '-'}; "
             f"lagging job {lagging_job(result) or '-'}."
             + (" **Interrupted** (Ctrl-C): jobs still running were stopped." if result.get("interrupted") else ""),
             "",
             "| job | model | GPUs | workers | PS | arrival s | wait s | turnaround s | "
             "batches | mean iteration s | status | launch -> first batch s | "
             "predicted run s | run s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for j in result["jobs"]:
        lines.append(f"| {j['name']} | {j['model']} | {_fmt(j.get('gpus'))} | "
                     f"{','.join(j.get('worker_hosts', [])) or '-'} | {','.join(j.get('ps_hosts', [])) or '-'} | "
                     f"{_fmt(j['arrival'])} | {_fmt(j.get('wait'))} | {_fmt(j.get('turnaround'))} | "
                     f"{_fmt(j.get('batches'))} | {_fmt(j.get('mean_iteration_s'), 3)} | {j['status']} | "
                     f"{_fmt(j.get('first_batch_s'), 2)} | {_fmt(j.get('predicted_run_s'))} | "
                     f"{_fmt(j.get('run_s'))} |")
    lines += ["", "## Decisions (closed loop: bandwidth measured by the controller)", "",
              "Bandwidth per worker to its PS in Mbit/s of the description (emulated fabric x "
              f"1/{result['emulation_bw_scale']:g}); 'in-host' = PS and workers on one host.", "",
              "| t s | job | GPUs | workers | PS | bw nominal | bw estimate (measured) | "
              "C(n) nominal s | C(n) used s |", "|---|---|---|---|---|---|---|---|---|"]
    for d in result["decisions"]:
        lines.append(f"| {_fmt(d['t'])} | {d['job']} | {d['gpus']} | {','.join(d['worker_hosts'])} | "
                     f"{','.join(d['ps_hosts'])} | "
                     f"{bw_text(d['bw_nominal_mbps'], d['ps_hosts'], d['worker_hosts'], '')} | "
                     f"{bw_text(d['bw_estimate_mbps'], d['ps_hosts'], d['worker_hosts'], '')} | "
                     f"{_fmt(d['C_n_nominal_s'], 3)} | {_fmt(d['C_n_s'], 3)} |")
    if result.get("preemptions") is not None:      # a run that may suspend (end_to_end.suspend)
        from end_to_end.preemption_report import preemption_lines
        lines += preemption_lines(result)
    failed = [j for j in result["jobs"] if j.get("error")]
    if failed:
        lines += ["", "## Failures", ""] + [f"- {j['name']}: {j['error'].splitlines()[0]}" for j in failed]
    lines += ["", "Plots: " + ", ".join(PLOTS), ""]
    return "\n".join(lines)


def plot_turnaround(result: RunResult):
    jobs = [j for j in result["jobs"] if j.get("turnaround") is not None]
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(jobs) + 2), 3.5))
    names = [j["name"] for j in jobs]
    waits = [j.get("wait") or 0.0 for j in jobs]
    runs = [j["turnaround"] - w for j, w in zip(jobs, waits)]
    ax.bar(names, waits, color="#bbbbbb", label="wait")
    ax.bar(names, runs, bottom=waits, color="#3b75af", label="run")
    ax.set_ylabel("turnaround (s)")
    ax.set_title(f"turnaround per job (priority {'on' if result['priority'] else 'off'})")
    ax.legend()
    ax.tick_params(axis="x", rotation=30)
    return fig


def plot_iterations(result: RunResult):
    fig, ax = plt.subplots(figsize=(8, 4))
    for j in result["jobs"]:
        its = [it for it in iterations_of(j) if it.worker == 0]
        if its:
            ax.plot([it.t_s for it in its], [it.time_s for it in its], marker=".", lw=1,
                    label=j["name"])
    ax.set_xlabel("time since the run started (s)")
    ax.set_ylabel("iteration time, worker 0 (s)")
    ax.set_title("iteration time per job")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    return fig


def plot_bottleneck(result: RunResult):
    link = bottleneck_link(result)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    if link:
        samples = result["links"]
        ax.plot([s["t"] for s in samples], [100 * s["util"].get(link, 0.0) for s in samples])
        ax.set_title(f"utilisation of the bottleneck link {link}")
    else:
        ax.set_title("no link statistics")
    ax.set_xlabel("time since the run started (s)")
    ax.set_ylabel("utilisation (%)")
    ax.set_ylim(bottom=0)
    return fig


def write_report(result: RunResult, out_dir: str | Path) -> Path:
    """Write report.json, report.md and the plots into ``out_dir``; returns report.md."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(result, indent=1))
    for name, plot in zip(PLOTS, (plot_turnaround, plot_iterations, plot_bottleneck)):
        fig = plot(result)
        fig.tight_layout()
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
    md = out / "report.md"
    md.write_text(markdown(result))
    return md


# ---- off vs on -------------------------------------------------------------------------

def comparison(off: RunResult, on: RunResult, lagging: str | None = None) -> dict:
    """The figures `sluice demo` and the priority experiment compare. Per job: where the
    scheduler put it and what it predicted (from the priority-on pass; the off pass's
    decisions are in its report), the measured JCT of both passes, and the exchange
    model's JCT of each pass (``predicted_jct_off_s`` / ``predicted_jct_on_s``: the
    passes' ``predicted_jct_model_s``, end_to_end.predict; None where not annotated)."""
    lag = lagging or lagging_job(off)
    a, b = ({j["name"]: j for j in r["jobs"]} for r in (off, on))
    def change(x, y):
        return None if x in (None, 0) or y is None else round(100 * (y - x) / x, 1)
    avg_off, avg_on = off["summary"]["avg_jct_s"], on["summary"]["avg_jct_s"]
    lag_off = a.get(lag, {}).get("mean_iteration_s")
    lag_on = b.get(lag, {}).get("mean_iteration_s")
    jobs = {}
    for n in a:
        placed = b.get(n) or a[n]
        jobs[n] = {"gpus": placed.get("gpus"), "hosts": placed.get("hosts"),
                   "racks": placed.get("racks"), "model": placed.get("model"),
                   "predicted_jct_s": predicted_jct(placed),
                   "predicted_jct_off_s": a[n].get("predicted_jct_model_s"),
                   "predicted_jct_on_s": b.get(n, {}).get("predicted_jct_model_s"),
                   "jct_off_s": a[n].get("turnaround"), "jct_on_s": b.get(n, {}).get("turnaround"),
                   "iter_off_s": a[n].get("mean_iteration_s"),
                   "iter_on_s": b.get(n, {}).get("mean_iteration_s")}
    check = model_check([off, on])
    return {"avg_jct_off_s": avg_off, "avg_jct_on_s": avg_on, "avg_jct_change_pct": change(avg_off, avg_on),
            "lagging_job": lag, "lagging_iter_off_s": lag_off, "lagging_iter_on_s": lag_on,
            "lagging_iter_change_pct": change(lag_off, lag_on),
            "model_check": check, "first_batch_median_s": check["first_batch_median_s"],
            "jobs": jobs}


def save_figure(fig, path: str | Path) -> Path:
    """A figure as a PNG file, closed after (every plot of the reports)."""
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def predicted_jct(job: dict) -> float | None:
    """The scheduler's view of a job's JCT: its wait + start-up + C(n) at the decision."""
    if job.get("predicted_run_s") is None or job.get("wait") is None:
        return None
    return round(job["wait"] + job["predicted_run_s"], 3)


def model_check(results: list[RunResult]) -> dict:
    """Predicted start -> finish (start-up + C(n) at the placement's bandwidth, fixed when
    the job started) against the measured start -> finish, over every finished job of
    the given runs: relative error |predicted - measured| / measured; median and worst;
    and the median launch -> first batch."""
    rows = []
    for r in results:
        for j in r["jobs"]:
            if j.get("status") == "finished" and j.get("predicted_run_s") and j.get("run_s"):
                err = (j["predicted_run_s"] - j["run_s"]) / j["run_s"]
                rows.append({"job": j["name"], "priority": "on" if r.get("priority") else "off",
                             "gpus": j.get("gpus"), "racks": j.get("racks"),
                             "predicted_run_s": j["predicted_run_s"], "run_s": j["run_s"],
                             "rel_error": round(err, 3), "first_batch_s": j.get("first_batch_s")})
    errs = [abs(x["rel_error"]) for x in rows]
    firsts = [x["first_batch_s"] for x in rows if x["first_batch_s"] is not None]
    return {"jobs": rows,
            "median_rel_error": round(statistics.median(errs), 3) if errs else None,
            "worst_rel_error": round(max(errs), 3) if errs else None,
            "first_batch_median_s": round(statistics.median(firsts), 2) if firsts else None}
