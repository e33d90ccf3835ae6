"""Speed of the simulator at scale: all 82,248 Philly jobs on cluster-2k (2,048 GPUs).

Runs the `fifo` baseline and `lyapunov` (Proteus + Liquid + group GA) in the same
process and prints wall time, jobs/s, decisions/s, the ratio against fifo, the peak
RSS (resource.getrusage) and the headline metrics. ``--exchange cluster|emulated`` runs
every policy a second time with the exchange model's pricing
(job_scheduler.core.exchange_pricing) and prints its time and JCT against the plain run.

    .venv/bin/python -m bench.scheduler.bench_simulate [--jobs N] [--slot 60] [--quick]
        [--exchange off|cluster|emulated] [--priority RULE] [--json [OUT]]
"""

from __future__ import annotations

import os
import resource
import time

from job_scheduler.core.estimator import Estimator
from job_scheduler.core.exchange_pricing import ExchangePricing
from job_scheduler.core.policies import make_policy
from job_scheduler.simulation.simulator import Simulator, stderr_progress
from job_scheduler.simulation.workloads import SHARED_WORKLOADS, load_workload
from topologies import load_topology

from bench import harness

# The figures of this bench in bench/RESULTS.md use the P100-derived profile, the GPU class
# the Proteus scenarios are sized for (the commands' default is the measured H100);
# SLUICE_PROFILE=h100 (or a profile file) re-runs them on another.
os.environ.setdefault("SLUICE_PROFILE", "p100")

PHILLY = SHARED_WORKLOADS / "philly.csv"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, quick="the first 2,000 Philly jobs (unless --jobs)")
    ap.add_argument("--jobs", type=int, default=None, help="first N Philly jobs (default all)")
    ap.add_argument("--slot", type=float, default=60.0)
    ap.add_argument("--topology", default="cluster-2k")
    ap.add_argument("--policies", default="fifo,lyapunov")
    ap.add_argument("--exchange", choices=("off", "cluster", "emulated"), default="off")
    ap.add_argument("--priority", default=None, help="the fabric's rule on the uplinks")
    args = ap.parse_args(argv)
    if args.quick and args.jobs is None:
        args.jobs = 2000

    t0 = time.perf_counter()
    topo = load_topology(args.topology)
    jobs = load_workload(PHILLY, trace_format="philly", jobs=args.jobs)
    print(f"loaded {len(jobs)} Philly jobs, {topo.name} ({topo.total_gpus} GPUs) in "
          f"{time.perf_counter() - t0:.1f} s; peak RSS {peak_rss_mb():.0f} MB", flush=True)
    walls, figs = {}, []
    worlds = {"plain": Estimator()}
    if args.exchange != "off":
        worlds[args.exchange] = Estimator(exchange=ExchangePricing.for_topology(
            topo, emulated=args.exchange == "emulated"))
    runs = [(name, world) for name in args.policies.split(",") for world in worlds]
    plain: dict[str, tuple[float, float]] = {}
    for name, world in runs:
        label = name if world == "plain" else f"{name}+{world}"
        t, cpu = time.perf_counter(), time.process_time()
        sim = Simulator(topo, jobs, make_policy(name), slot=args.slot, estimator=worlds[world],
                        progress=stderr_progress(label), priority=args.priority)
        res = sim.run()
        wall = time.perf_counter() - t
        cpu = time.process_time() - cpu
        if world != "plain":
            base_cpu, base_jct = plain[name]
            print(f"{label:<9} cpu {cpu:7.1f} s ({cpu / base_cpu:.2f}x plain)  avg JCT "
                  f"{res.avg_jct:10.0f} s ({res.avg_jct / base_jct - 1:+.1%} vs plain)  "
                  f"p95 {res.p95_jct:10.0f} s", flush=True)
            figs.append(harness.figure(f"{label} simulation cpu", cpu, "s", baseline=base_cpu,
                                       note=f"(avg JCT {res.avg_jct:.0f} s vs {base_jct:.0f} s)"))
            continue
        plain[name] = (cpu, res.avg_jct)
        walls[name] = wall
        # CPU time too: on a shared host with two cores wall time depends on the neighbours
        print(f"{name:<9} wall {wall:7.1f} s  cpu {cpu:7.1f} s  {len(jobs) / wall:9.0f} jobs/s  "
              f"{res.decisions / wall:9.0f} decisions/s ({res.decisions} decisions)  "
              f"peak RSS {peak_rss_mb():6.0f} MB  | avg JCT {res.avg_jct:10.0f} s  "
              f"median {res.median_jct:8.0f} s  p95 {res.p95_jct:10.0f} s  "
              f"avg wait {res.avg_wait:9.0f} s  GPU util {res.gpu_util:6.1%}", flush=True)
        ga = getattr(sim.policy, "ga", None)
        if ga is not None:
            print(f"{'':<9} group GA: {ga.runs} batch searches, {ga.improved} beat best fit")
        figs.append(harness.figure(f"{name} simulation of {len(jobs)} jobs", wall, "s",
                                   baseline=walls.get("fifo") if name != "fifo" else None,
                                   note=f"(cpu {cpu:.1f} s; avg JCT {res.avg_jct:.0f} s)"))
    figs.append(harness.figure("peak RSS", peak_rss_mb(), "MB"))
    print(f"total wall {time.perf_counter() - t0:.1f} s, peak RSS {peak_rss_mb():.0f} MB")
    harness.write_json(args.json, figs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
