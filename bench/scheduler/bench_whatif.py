"""Speed of ``sluice whatif``: the demo's four arms on all 82,247 Philly jobs on cluster-2k.

For each offered load asked (``recorded``: the arrivals as the trace has them; a number:
scaled to it, ``end_to_end.whatif``) runs every arm in the simulator, as many at once as
``--workers`` says (the command's pool), and prints the wall time of the four, each
arm's CPU and wall, and its average JCT.

    .venv/bin/python -m bench.scheduler.bench_whatif [--quick] [--jobs N]
        [--loads recorded,0.9] [--workers 2] [--exchange cluster] [--json [OUT]]
"""

from __future__ import annotations

import time

from end_to_end.arms import ALL_ARMS, parse_arms
from end_to_end.whatif import offered_load, parse_load, scale_to_load
from end_to_end.whatif_run import SimOptions, run_arms
from job_scheduler.simulation.workloads import SHARED_WORKLOADS, load_workload
from topologies import load_topology

from bench import harness

PHILLY = SHARED_WORKLOADS / "philly.csv"


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, quick="the first 2,000 Philly jobs (unless --jobs)")
    ap.add_argument("--jobs", type=int, default=None, help="first N Philly jobs (default all)")
    ap.add_argument("--topology", default="cluster-2k")
    ap.add_argument("--loads", default="recorded,0.9")
    ap.add_argument("--arms", default=ALL_ARMS)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--exchange", choices=("off", "cluster", "emulated"), default="cluster")
    ap.add_argument("--slot", type=float, default=10.0)
    args = ap.parse_args(argv)
    if args.quick and args.jobs is None:
        args.jobs = 2000

    t0 = time.perf_counter()
    topo = load_topology(args.topology)
    trace = load_workload(PHILLY, trace_format="philly", jobs=args.jobs)
    arms = parse_arms(args.arms)
    options = SimOptions(exchange=args.exchange, slot=args.slot)
    print(f"loaded {len(trace)} Philly jobs, {topo.name} ({topo.total_gpus} GPUs) in "
          f"{time.perf_counter() - t0:.1f} s; recorded offered load "
          f"{offered_load(trace, topo.total_gpus):.3f}", flush=True)
    figs = []
    for text in args.loads.split(","):
        jobs, _ = scale_to_load(trace, topo.total_gpus, parse_load(text))
        wall = time.perf_counter()
        results = run_arms(topo, jobs, arms, options, args.workers)
        wall = time.perf_counter() - wall
        cpu = sum(r["cpu_s"] for r in results.values())
        for key, r in results.items():
            print(f"  load {text:<8} arm {key} ({r['policy']:<8}) cpu {r['cpu_s']:7.1f} s  "
                  f"wall {r['wall_s']:7.1f} s  avg JCT {r['avg_jct_s']:11.0f} s  "
                  f"p95 {r['p95_jct_s']:11.0f} s  GPU util {r['gpu_util']:6.1%}  "
                  f"cross-rack {r['cross_rack_share']:6.1%}  uplink p99 "
                  f"{r['uplink_util_p99']:6.1%}", flush=True)
        figs.append(harness.figure(
            f"whatif {len(arms)} arms, {len(jobs)} jobs, load {text}, wall", wall, "s",
            note=f"(cpu {cpu:.1f} s over the arms, {args.workers} workers)"))
    print(f"total wall {time.perf_counter() - t0:.1f} s")
    harness.write_json(args.json, figs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
