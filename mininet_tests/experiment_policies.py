"""Scheduling policies compared on the emulated fabric with one job file (real PS jobs).

    .venv/bin/python -m mininet_tests.experiment_policies [--jobs FILE]
        [--policies lyapunov,fifo,single,tetris,random] [--priority on|off] [--out DIR]
        [--topology two-rack-100g] [--compute auto|torch|emulated] [--profile FILE|NAME]

Every policy runs the same jobs (default: ``sluice demo``'s six jobs on its topology)
through the same real-time loop as ``sluice run`` (``end_to_end.runloop``) on one controller
and one fabric brought up once; the table gives average JCT, makespan, mean wait and the
mean iteration time over all jobs per policy, beside the simulator's prediction of the
average JCT for the same jobs, policy and estimator (its C(n) with the runtime's terms),
and the model check per job (predicted start -> finish against the measured one). The
plot shows measured and predicted average JCT per policy. One run per policy: on a
shared host with two cores expect a few seconds of noise per run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from job_scheduler.core.policies import POLICY_NAMES, make_policy  # noqa: E402
from sluice_common.errors import InputError  # noqa: E402
from end_to_end.report import write_report  # noqa: E402
from end_to_end.run import (DEMO_JOBS, DEMO_TOPOLOGY, environment,  # noqa: E402
                        run_estimator, warm_processes)
from end_to_end.runloop import RealTimeRun  # noqa: E402
from end_to_end.run_options import RunOptions
from topologies import load_topology  # noqa: E402


def summarise(result: dict) -> dict:
    jobs = [j for j in result["jobs"] if j.get("status") == "finished"]
    iters = [j["mean_iteration_s"] for j in jobs if j.get("mean_iteration_s") is not None]
    return {"policy": result["policy"], "finished": len(jobs), "jobs": len(result["jobs"]),
            "avg_jct_s": result["summary"]["avg_jct_s"], "makespan_s": result["summary"]["makespan_s"],
            "mean_wait_s": round(statistics.fmean(j["wait"] for j in jobs), 2) if jobs else None,
            "mean_iteration_s": round(statistics.fmean(iters), 3) if iters else None,
            "gpus": {j["name"]: j.get("gpus") for j in result["jobs"]}}


def simulated_avg_jct(topology, specs, name: str, estimator) -> float:
    """The simulator's average JCT for the same jobs, policy and estimator (1 s slots, as
    the real-time loop)."""
    from job_scheduler.core.policies import make_policy as sim_policy
    from job_scheduler.simulation.simulator import Simulator

    return round(Simulator(topology, specs, sim_policy(name), slot=1.0,
                           estimator=estimator).run().avg_jct, 2)


def main(argv: list[str] | None = None) -> int:
    from sluice_common.jobspec import load_jobs
    from ps_runtime.cli import add_compute_arguments as add_arguments
    from ps_runtime.compute import describe, resolve_compute
    from end_to_end.report import model_check

    ap = argparse.ArgumentParser(prog="python -m mininet_tests.experiment_policies",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", default=str(DEMO_JOBS))
    ap.add_argument("--policies", default="lyapunov,fifo,single,tetris,random")
    ap.add_argument("--priority", default="on", choices=("on", "off"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--topology", default=DEMO_TOPOLOGY)
    add_arguments(ap)
    args = ap.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    try:
        bad = [p for p in policies if p not in POLICY_NAMES]
        if bad or not policies:
            raise InputError("--policies", f"unknown policy {bad[0] if bad else '(none)'!r} "
                             f"(known: {', '.join(POLICY_NAMES)})")
        specs = load_jobs(args.jobs)
        topology = load_topology(args.topology)
        args.compute = resolve_compute(args.compute)
        info = describe(args.compute, args.profile)
    except InputError as err:
        print(f"experiment_policies: error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out or f"runs/experiment-policies-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    print(f"experiment: compute {info['compute']}, device {info['device']}, profile "
          f"{info['profile']}", file=sys.stderr, flush=True)
    rows, results = [], []
    started = time.monotonic()
    with environment(topology, args.topology, out) as (fabric, client), \
            warm_processes(topology, fabric, args.compute) as runner:
        for k, name in enumerate(policies):
            runner.wait_ready()
            print(f"experiment: policy {name} ({k + 1}/{len(policies)})", file=sys.stderr, flush=True)
            estimator = run_estimator(topology, args.compute, args.profile)
            options = RunOptions(priority=args.priority == "on", port_base=20000 + 1000 * k,
                                 compute=args.compute, profile=args.profile, compute_info=info)
            result = RealTimeRun(topology, specs, make_policy(name), estimator,
                                 fabric, client, out / name, options, policy_name=name,
                                 runner=runner).run()
            write_report(result, out / name)
            results.append(result)
            row = summarise(result)
            row["sim_avg_jct_s"] = simulated_avg_jct(topology, specs, name, estimator)
            check = model_check([result])
            row["model_median_rel_error"] = check["median_rel_error"]
            row["model_worst_rel_error"] = check["worst_rel_error"]
            row["first_batch_median_s"] = check["first_batch_median_s"]
            rows.append(row)
    wall = time.monotonic() - started
    overall = model_check(results)
    (out / "experiment.json").write_text(json.dumps(
        {"rows": rows, "wall_time_s": round(wall, 1), **info, "topology": topology.name,
         "model_check": overall}, indent=1))
    title = (f"# Policies on {topology.name}: {args.jobs}, priority {args.priority}, "
             f"{info['compute']} compute")
    text = markdown(rows, overall, title, f"wall time {wall:.0f} s; runs in {out}")
    (out / "experiment.md").write_text(text)
    plot_avg_jct(rows, f"policies on the emulated {topology.name} fabric ({info['compute']})",
                 out / "avg_jct.png")
    print(text)
    return 0 if all(r["finished"] == r["jobs"] for r in rows) else 1


def markdown(rows: list[dict], overall: dict, title: str, footer: str) -> str:
    """The experiment's table: one row per policy, the model check over all runs."""
    lines = [title, "",
             "| policy | finished | avg JCT s | simulator avg JCT s | makespan s | mean wait s | "
             "mean iteration s | model error median / worst | GPUs per job |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        gpus = ", ".join(f"{n}:{g}" for n, g in r["gpus"].items())
        err = (f"{100 * r['model_median_rel_error']:.0f} % / {100 * r['model_worst_rel_error']:.0f} %"
               if r["model_median_rel_error"] is not None else "-")
        lines.append(f"| {r['policy']} | {r['finished']}/{r['jobs']} | {r['avg_jct_s']} | "
                     f"{r['sim_avg_jct_s']} | {r['makespan_s']} | {r['mean_wait_s']} | "
                     f"{r['mean_iteration_s']} | {err} | {gpus} |")
    if overall["median_rel_error"] is not None:
        lines += ["", f"Model check over all {len(overall['jobs'])} job runs: median error "
                  f"{100 * overall['median_rel_error']:.0f} %, worst {100 * overall['worst_rel_error']:.0f} %; "
                  f"launch -> first batch median {overall['first_batch_median_s']} s."]
    lines += ["", footer, ""]
    return "\n".join(lines)


def plot_avg_jct(rows: list[dict], title: str, path: Path) -> None:
    """Measured and simulated average JCT per policy, side by side."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["avg_jct_s"] or 0 for r in rows], 0.4, color="#3b75af",
           label="measured")
    ax.bar([x + 0.2 for x in xs], [r["sim_avg_jct_s"] or 0 for r in rows], 0.4, color="#bbbbbb",
           label="simulator")
    ax.set_xticks(list(xs), [r["policy"] for r in rows])
    ax.set_ylabel("average JCT (s)")
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
