"""Scheduler-core speed figures: trace loading, estimates, decisions.

    .venv/bin/python -m bench.scheduler.bench_scheduler_core [--quick] [--json [OUT]]

Each figure comes with a baseline measured in the same run (a bare csv.reader pass over
the same file; a bare Python loop of the same length), so the ratios survive a loaded
machine better than absolute times do.
"""

from __future__ import annotations

import csv
import time

from job_scheduler.core.estimator import Estimator, effective_bandwidth
from job_scheduler.core.proteus import decide
from job_scheduler.simulation.workloads import SHARED_WORKLOADS, load_workload
from topologies import load_topology

from bench import harness

PHILLY = str(SHARED_WORKLOADS / "philly.csv")
TIRESIAS = str(SHARED_WORKLOADS / "tiresias_60_job.csv")


def best_of(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, quick="the first 5,000 Philly jobs, 10,000 decisions")
    args = ap.parse_args(argv)
    jobs_n, n_calls = (5000, 10_000) if args.quick else (None, 100_000)
    figs = []

    def rows():
        with open(PHILLY, newline="") as f:
            it = csv.reader(f)
            return sum(1 for i, _ in enumerate(it) if jobs_n is None or i <= jobs_n)

    base, _ = best_of(rows)
    load, jobs = best_of(lambda: load_workload(PHILLY, trace_format="philly", jobs=jobs_n))
    figs.append(harness.figure(f"philly load+validate ({len(jobs)} jobs)", load, "s",
                               baseline=base, note="(baseline: bare csv.reader pass; target < 3 s)"))

    est = Estimator()
    sample = jobs[:20000]
    t_est, _ = best_of(lambda: [est.C(j, 4, 2500.0) for j in sample], 1)
    figs.append(harness.figure("estimator C(n) evaluations", len(sample) / t_est, "/s",
                               note="(first call per trace job includes its calibration)"))

    costs = {n: 100.0 / n + 5 for n in range(1, 9)}
    t_dec, _ = best_of(lambda: [decide(costs, 100.0, 500.0, 50.0, 10.0, 8, 8)
                                for _ in range(n_calls)], 1)
    t_loop, _ = best_of(lambda: [min(costs.values()) for _ in range(n_calls)], 1)
    figs.append(harness.figure("proteus.decide (8 candidates) per call", t_dec / n_calls * 1e6,
                               "us", baseline=t_loop / n_calls * 1e6,
                               note=f"(baseline: a bare min() over the same dict; "
                                    f"{n_calls / t_dec:,.0f} decisions/s)"))

    topo = load_topology("cluster-2k")
    hosts = [h.name for h in topo.hosts]
    t_bw, bw = best_of(lambda: effective_bandwidth(topo, hosts[:2], hosts[8:40]), 1)
    figs.append(harness.figure("effective_bandwidth cluster-2k 2 PS x 32 workers",
                               t_bw * 1e3, "ms", note=f"-> {bw:.0f} Mbit/s"))

    tj = load_workload(TIRESIAS, trace_format="tiresias")
    worst = max(abs(est.C(j, j.trace_gpus) - j.trace_duration) / j.trace_duration for j in tj)
    figs.append(harness.figure("tiresias calibration max |C(trace_gpus) - duration| / duration",
                               worst))
    harness.write_json(args.json, figs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
