"""Scheduling policies compared on the emulated fabric with one job file (real PS jobs).

    .venv/bin/python -m mininet_tests.experiment_policies [--jobs FILE]
        [--policies lyapunov,fifo,single,tetris,random] [--priority on|off] [--out DIR]

Every policy runs the same jobs (default: ``sluice demo``'s six jobs) through the same
real-time loop as ``sluice run`` (``sluice.runloop``) on one controller and one two-rack
fabric brought up once; the table gives average JCT, makespan, mean wait and the mean
iteration time over all jobs per policy, the plot the average JCT per policy. One run
per policy: on this shared 2-core machine expect a few seconds of noise per run.
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

from job_scheduler.estimator import Estimator, nominal_bandwidth  # noqa: E402
from job_scheduler.service_policy import make_policy  # noqa: E402
from sluice.errors import InputError  # noqa: E402
from sluice.report import write_report  # noqa: E402
from sluice.run import DEMO_JOBS, POLICY_NAMES, environment  # noqa: E402
from sluice.runloop import RealTimeRun, RunOptions  # noqa: E402
from topologies import load_topology  # noqa: E402


def summarise(result: dict) -> dict:
    jobs = [j for j in result["jobs"] if j.get("status") == "finished"]
    iters = [j["mean_iteration_s"] for j in jobs if j.get("mean_iteration_s") is not None]
    return {"policy": result["policy"], "finished": len(jobs), "jobs": len(result["jobs"]),
            "avg_jct_s": result["summary"]["avg_jct_s"], "makespan_s": result["summary"]["makespan_s"],
            "mean_wait_s": round(statistics.fmean(j["wait"] for j in jobs), 2) if jobs else None,
            "mean_iteration_s": round(statistics.fmean(iters), 3) if iters else None,
            "gpus": {j["name"]: j.get("gpus") for j in result["jobs"]}}


def main(argv: list[str] | None = None) -> int:
    from job_scheduler.jobspec import load_jobs

    ap = argparse.ArgumentParser(prog="python -m mininet_tests.experiment_policies",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", default=str(DEMO_JOBS))
    ap.add_argument("--policies", default="lyapunov,fifo,single,tetris,random")
    ap.add_argument("--priority", default="on", choices=("on", "off"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    try:
        bad = [p for p in policies if p not in POLICY_NAMES]
        if bad or not policies:
            raise InputError("--policies", f"unknown policy {bad[0] if bad else '(none)'!r} "
                             f"(known: {', '.join(POLICY_NAMES)})")
        specs = load_jobs(args.jobs)
    except InputError as err:
        print(f"experiment_policies: error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out or f"runs/experiment-policies-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    topology = load_topology("two-rack")
    rows = []
    started = time.monotonic()
    with environment(topology, "two-rack", out) as (fabric, client):
        for k, name in enumerate(policies):
            print(f"experiment: policy {name} ({k + 1}/{len(policies)})", file=sys.stderr, flush=True)
            estimator = Estimator(nominal_bw_mbps=nominal_bandwidth(topology))
            options = RunOptions(priority=args.priority == "on", port_base=20000 + 1000 * k)
            result = RealTimeRun(topology, specs, make_policy(name, topology, estimator), estimator,
                                 fabric, client, out / name, options, policy_name=name).run()
            write_report(result, out / name)
            rows.append(summarise(result))
    wall = time.monotonic() - started
    (out / "experiment.json").write_text(json.dumps({"rows": rows, "wall_time_s": round(wall, 1)}, indent=1))
    lines = [f"# Policies on the two-rack fabric: {args.jobs}, priority {args.priority}", "",
             "| policy | finished | avg JCT s | makespan s | mean wait s | mean iteration s | GPUs per job |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        gpus = ", ".join(f"{n}:{g}" for n, g in r["gpus"].items())
        lines.append(f"| {r['policy']} | {r['finished']}/{r['jobs']} | {r['avg_jct_s']} | "
                     f"{r['makespan_s']} | {r['mean_wait_s']} | {r['mean_iteration_s']} | {gpus} |")
    lines += ["", f"wall time {wall:.0f} s; runs in {out}", ""]
    text = "\n".join(lines)
    (out / "experiment.md").write_text(text)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([r["policy"] for r in rows], [r["avg_jct_s"] or 0 for r in rows], color="#3b75af")
    ax.set_ylabel("average JCT (s)")
    ax.set_title("policies on the emulated two-rack fabric")
    fig.tight_layout()
    fig.savefig(out / "avg_jct.png", dpi=100)
    plt.close(fig)
    print(text)
    return 0 if all(r["finished"] == r["jobs"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
