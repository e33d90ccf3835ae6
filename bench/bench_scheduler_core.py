"""Scheduler-core speed figures: trace loading, estimates, decisions.

    .venv/bin/python bench/scheduler_core_bench.py

Each figure comes with a baseline measured in the same run (a bare csv.reader pass over
the same file; a bare Python loop of the same length), so the ratios survive a loaded
machine better than absolute times do.
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from job_scheduler.estimator import Estimator, effective_bandwidth  # noqa: E402
from job_scheduler.proteus import decide  # noqa: E402
from job_scheduler.workloads import load_workload  # noqa: E402
from topologies import load_topology  # noqa: E402
from job_scheduler.workloads import SHARED_WORKLOADS

PHILLY = str(SHARED_WORKLOADS / "philly.csv")
TIRESIAS = str(SHARED_WORKLOADS / "tiresias_60_job.csv")


def best_of(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    base, rows = best_of(lambda: sum(1 for _ in csv.reader(open(PHILLY, newline=""))))
    load, jobs = best_of(lambda: load_workload(PHILLY, trace_format="philly"))
    print(f"philly: {len(jobs)} jobs loaded+validated in {load:.2f} s "
          f"(bare csv.reader pass: {base:.3f} s, ratio {load / base:.1f}x; target < 3 s)")

    est = Estimator()
    sample = jobs[:20000]
    t_est, _ = best_of(lambda: [est.C(j, 4, 2500.0) for j in sample], 1)
    print(f"estimator: {len(sample) / t_est:,.0f} C(n) evaluations/s "
          f"(first call per trace job includes its calibration)")

    costs = {n: 100.0 / n + 5 for n in range(1, 9)}
    n_calls = 100_000
    t_dec, _ = best_of(lambda: [decide(costs, 100.0, 500.0, 50.0, 10.0, 8, 8)
                                for _ in range(n_calls)], 1)
    t_loop, _ = best_of(lambda: [min(costs.values()) for _ in range(n_calls)], 1)
    print(f"proteus.decide (8 candidates): {n_calls / t_dec:,.0f} decisions/s "
          f"({t_dec / t_loop:.1f}x a bare min() over the same dict)")

    topo = load_topology("cluster-2k")
    hosts = [h.name for h in topo.hosts]
    t_bw, bw = best_of(lambda: effective_bandwidth(topo, hosts[:2], hosts[8:40]), 1)
    print(f"effective_bandwidth on cluster-2k, 2 PS x 32 workers: {t_bw * 1e3:.1f} ms "
          f"-> {bw:.0f} Mbit/s")

    tj = load_workload(TIRESIAS, trace_format="tiresias")
    worst = max(abs(est.C(j, j.trace_gpus) - j.trace_duration) / j.trace_duration for j in tj)
    print(f"tiresias calibration: max |C(trace_gpus) - duration| / duration = {worst:.1e}")


if __name__ == "__main__":
    main()
