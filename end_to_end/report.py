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

from end_to_end.result import RunResult, iterations_of  # noqa: E402

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
              f"1/{result['emulation_bw_scale']:g}); 'local' = PS and workers on one host.", "",
              "| t s | job | GPUs | workers | PS | bw nominal | bw estimate (measured) | "
              "C(n) nominal s | C(n) used s |", "|---|---|---|---|---|---|---|---|---|"]
    for d in result["decisions"]:
        lines.append(f"| {_fmt(d['t'])} | {d['job']} | {d['gpus']} | {','.join(d['worker_hosts'])} | "
                     f"{','.join(d['ps_hosts'])} | {_fmt(d['bw_nominal_mbps'], 0) if d['bw_nominal_mbps'] is not None else 'local'} | "
                     f"{_fmt(d['bw_estimate_mbps'], 0) if d['bw_estimate_mbps'] is not None else 'local'} | "
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


def plot_comparison(cmp: dict):
    """``sluice demo``'s picture: each job's measured JCT with priority off and on (bars)
    and the exchange model's prediction for each pass, made before it (markers)."""
    names = list(cmp["jobs"])
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(names) + 2), 4))
    width = 0.38
    for k, (mode, color) in enumerate((("off", "#bbbbbb"), ("on", "#3b75af"))):
        xs = [i + (k - 0.5) * width for i in range(len(names))]
        measured = [cmp["jobs"][n][f"jct_{mode}_s"] for n in names]
        ax.bar(xs, [m if m is not None else 0.0 for m in measured], width, color=color,
               label=f"measured, priority {mode}")
        pred = [(x, cmp["jobs"][n].get(f"predicted_jct_{mode}_s")) for x, n in zip(xs, names)]
        pred = [(x, y) for x, y in pred if y is not None]
        if pred:
            ax.scatter(*zip(*pred), marker="_", s=400, linewidths=2.5, color="#d62728",
                       zorder=3, label="model" if k == 0 else None)
    ax.set_xticks(range(len(names)), [f"{n}\n{cmp['jobs'][n].get('racks') or '?'} rack(s)"
                                      for n in names])
    ax.set_ylabel("JCT (s)")
    ax.set_title(f"JCT per job, priority off vs on: average {_fmt(cmp['avg_jct_off_s'])} -> "
                 f"{_fmt(cmp['avg_jct_on_s'])} s ({_fmt(cmp['avg_jct_change_pct'])} %)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def save_figure(fig, path: str | Path) -> Path:
    """A figure as a PNG file, closed after (every plot of the reports)."""
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def write_comparison_plot(cmp: dict, path: str | Path) -> Path:
    return save_figure(plot_comparison(cmp), path)


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


def comparison_markdown(cmp: dict) -> str:
    lines = ["| job | model | GPUs | hosts | racks | predicted JCT s | JCT off s (model) | "
             "JCT on s (model) | mean iteration off s | mean iteration on s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, j in cmp["jobs"].items():
        mark = " (lagging)" if name == cmp["lagging_job"] else ""
        lines.append(f"| {name}{mark} | {_fmt(j.get('model'))} | {_fmt(j.get('gpus'))} | "
                     f"{_fmt(j.get('hosts'))} | {_fmt(j.get('racks'))} | "
                     f"{_fmt(j.get('predicted_jct_s'))} | {_fmt(j['jct_off_s'])} "
                     f"({_fmt(j.get('predicted_jct_off_s'))}) | {_fmt(j['jct_on_s'])} "
                     f"({_fmt(j.get('predicted_jct_on_s'))}) | {_fmt(j['iter_off_s'], 3)} | "
                     f"{_fmt(j['iter_on_s'], 3)} |")
    lines += [f"| **average JCT** | | | | | | {_fmt(cmp['avg_jct_off_s'])} | {_fmt(cmp['avg_jct_on_s'])} | "
              f"change {_fmt(cmp['avg_jct_change_pct'])} % | |",
              f"| **lagging job ({cmp['lagging_job']}) mean iteration** | | | | | | | | "
              f"{_fmt(cmp['lagging_iter_off_s'], 3)} | {_fmt(cmp['lagging_iter_on_s'], 3)} "
              f"(change {_fmt(cmp['lagging_iter_change_pct'])} %) |"]
    check = cmp.get("model_check")
    if check and check["median_rel_error"] is not None:
        lines += ["", f"Model check (predicted start-up + C(n) vs measured start -> finish, "
                  f"{len(check['jobs'])} job runs): median error "
                  f"{100 * check['median_rel_error']:.0f} %, worst {100 * check['worst_rel_error']:.0f} %; "
                  f"launch -> first batch median {_fmt(check['first_batch_median_s'])} s."]
    return "\n".join(lines)


def demo_summary(cmp: dict) -> str:
    """Two or three plain sentences: what the scheduler decided, what priority changed."""
    jobs = cmp["jobs"]
    spread = [n for n, j in jobs.items() if (j.get("racks") or 0) > 1]
    hosts = [n for n, j in jobs.items() if (j.get("hosts") or 0) > 1 and n not in spread]
    local = [n for n, j in jobs.items() if j.get("hosts") == 1]
    parts = []
    if spread:
        parts.append(f"The scheduler spread {_names(spread)} across both racks (Comm(n) over the "
                     f"rack uplinks cost less than the compute the extra GPUs saved)"
                     + (f", {_names(hosts)} across hosts of one rack" if hosts else "")
                     + (f", and kept {_names(local)} on one host each" if local else "") + ".")
    elif hosts:
        parts.append(f"The scheduler spread {_names(hosts)} across hosts of one rack and kept the "
                     "other jobs on one host; no job crossed a rack uplink.")
    else:
        parts.append("The scheduler kept every job's PS and workers on one host, so no PS traffic "
                     "crossed the fabric and priority had nothing to act on.")
    if len(spread) >= 2:
        change = cmp.get("avg_jct_change_pct")
        shared = ", ".join(f"{n} {_fmt(jobs[n]['jct_off_s'])} -> {_fmt(jobs[n]['jct_on_s'])} s"
                           for n in spread)
        parts.append(f"{_names(spread)} shared the rack uplinks; with flow priority on (the --rank rule), "
                     f"their JCTs went {shared}, and the average JCT changed by "
                     f"{_fmt(change)} % (one run each: a few percent is run-to-run noise).")
    check = cmp.get("model_check") or {}
    if check.get("median_rel_error") is not None:
        parts.append(f"The estimator's start-up + C(n) predicted each job's run time within "
                     f"{100 * check['median_rel_error']:.0f} % (median; worst "
                     f"{100 * check['worst_rel_error']:.0f} %).")
    return " ".join(parts)


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
