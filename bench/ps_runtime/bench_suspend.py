"""Suspend and resume costs of real PS jobs, per model and worker count.

    .venv/bin/python -m bench.ps_runtime.bench_suspend [--repeats 2] [--write job_scheduler/core/data/preemption_costs.yaml]
    sudo .venv/bin/python -m bench.ps_runtime.bench_suspend --fabric [--repeats 2]     # the demo fabric
    sudo .venv/bin/python -m bench.ps_runtime.bench_suspend --fabric --fabric-workers 8 --repeats 5
        # the bound: suspend + resume of the 8-worker job, median of 5 under 5 s

Each case runs a real ps-lite job on this machine's loopback (1 server, N workers, warm
pre-started processes as `sluice run` uses), waits until every worker has done 3
batches, then asks it to suspend (ps_runtime.checkpoint):

- suspend_s: from the request until every process of the job has exited, with the
  checkpoint complete (the batch in progress finishes first: part of the cost);
- resume_s: from launching the job again on the checkpoint until every worker has
  finished its first batch (start, connect, load, one batch: "to first batch");
- batch_s: the median batch of the job before the suspension, for scale.

Emulated compute (resnet18, alexnet, vgg16, googlenet: Cost_bat(b) of the default
profile, the model's bytes on the wire, the state file = parameters + momentum) and
torch compute on the CPU (smallcnn, resnet18 at 32x32 input). Prints one JSON line per
measurement and a table of medians; ``--write`` stores the medians in the YAML the
simulator reads (job_scheduler.core.preemption).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sluice_common.jobspec import JobSpec
from ps_runtime.launcher import LineFollower, PSJob, WorkerOptions, parse_batches
from ps_runtime.plan import HostPlan
from ps_runtime.ports import free_port_block
from ps_runtime.runners import LocalRunner
from ps_runtime.warm import WarmRunner

from bench import harness

EMULATED = ("resnet18", "alexnet", "vgg16", "googlenet")
TORCH = ("smallcnn", "resnet18")
WORKERS = (1, 2, 4)
BATCH_SIZE = 8


def _wait_batches(job: PSJob, followers, want: int, timeout: float = 240) -> float:
    """Until every worker has printed batch ``want`` (returns the time it happened)."""
    done = {p.rank: 0 for p in job.workers}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rank, f in followers.items():
            for rec in parse_batches(f.new_lines()):
                done[rank] = max(done[rank], rec.batch)
        if min(done.values()) >= want:
            return time.monotonic()
        job.poll()
        time.sleep(0.01)
    raise TimeoutError(f"job {job.spec.name}: no batch {want} within {timeout} s")


def _wait_exit(job: PSJob, timeout: float = 120) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.poll():
            return time.monotonic()
        time.sleep(0.01)
    raise TimeoutError(f"job {job.spec.name} did not exit")


def measure(model: str, compute: str, workers: int, runner, tmp: Path, placement=None,
            bw_scale: float = 1.0) -> dict:
    spec = JobSpec(name=f"b-{model}-{compute}-{workers}", model=model, dataset_size=BATCH_SIZE,
                   epochs=1, batch_size=BATCH_SIZE, max_gpus=workers)
    ckpt = tmp / spec.name / "checkpoint"
    common = dict(threads=1, compute=compute, input_size=32, checkpoint_dir=str(ckpt),
                  bw_scale=bw_scale)
    placement = placement or HostPlan.loopback(1, workers)
    first = PSJob(spec, placement, runner, tmp / spec.name / "a",
                  batches=10_000, base_port=free_port_block(), options=WorkerOptions(**common))
    with first:
        first.start()
        follow = {p.rank: LineFollower(p.log_path) for p in first.workers}
        _wait_batches(first, follow, 3)
        t_req = time.monotonic()
        first.request_suspend()
        t_exit = _wait_exit(first)
        result = first.result()
    stopped = first.suspended_batch()
    if stopped is None:
        raise RuntimeError(f"{spec.name}: not suspended")
    batch_s = statistics.median(r.time_s for recs in result.batches.values() for r in recs[1:])
    second = PSJob(spec, placement, runner, tmp / spec.name / "b",
                   batches=stopped + 2, base_port=free_port_block(),
                   options=WorkerOptions(**{**common, "checkpoint_dir": None},
                                         resume_from=str(ckpt)))
    with second:
        t_launch = time.monotonic()
        second.start()
        follow = {p.rank: LineFollower(p.log_path) for p in second.workers}
        t_first = _wait_batches(second, follow, stopped + 1)
        _wait_exit(second)
    return {"model": model, "compute": compute, "workers": workers,
            "suspend_s": round(t_exit - t_req, 3), "resume_s": round(t_first - t_launch, 3),
            "batch_s": round(batch_s, 4), "stopped_after": stopped,
            "state_mb": round(sum(f.stat().st_size for f in ckpt.glob("worker*.state")) / 1e6, 1)}


BOUND_S = 5.0      # the bound: suspend + resume on the demo fabric (8 workers), median


def on_fabric(repeats: int, out: Path, workers: tuple[int, ...] = (4, 8)) -> int:
    """resnet18, emulated, on the demo fabric (two-rack-100g, Mininet, warm processes as
    `sluice demo` has them): 4 workers on h1+h2 (PS h1), then 8 on h1..h4 (PS h1)."""
    from ps_runtime.plan import HostPlan as P
    from end_to_end.run import DEMO_TOPOLOGY, environment, warm_processes
    from topologies import load_topology

    topo = load_topology(DEMO_TOPOLOGY)
    layouts = {4: (["h1"], ["h1", "h1", "h2", "h2"]),
               8: (["h1"], ["h1", "h1", "h2", "h2", "h3", "h3", "h4", "h4"])}
    layouts = {n: v for n, v in layouts.items() if n in workers}
    rows = []
    load0 = os.getloadavg()[0]
    out.mkdir(parents=True, exist_ok=True)
    with environment(topo, DEMO_TOPOLOGY, out) as (fabric, client), \
            warm_processes(topo, fabric, "emulated") as runner:
        for rep in range(repeats):
            for n, (ps, workers) in layouts.items():
                runner.wait_ready()
                row = measure("resnet18", "emulated", n, runner, out / str(rep),
                              P.on_hosts(topo, ps, workers), topo.emulation_bw_scale)
                row["fabric"] = DEMO_TOPOLOGY
                row["interruption_s"] = round(row["suspend_s"] + row["resume_s"], 3)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print(f"\nresnet18 emulated on {DEMO_TOPOLOGY} (Mininet), load average {load0:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    for r in rows:
        print(f"{r['workers']} workers: suspend {r['suspend_s']:.2f} s + resume {r['resume_s']:.2f} s "
              f"= interruption {r['interruption_s']:.2f} s (batch {r['batch_s']:.3f} s)")
    for n in layouts:
        mine = [r["interruption_s"] for r in rows if r["workers"] == n]
        med = statistics.median(mine)
        print(f"{n} workers: median interruption {med:.2f} s over {len(mine)} runs; under "
              f"{BOUND_S:g} s: {'yes' if med < BOUND_S else 'no'}")
    return 0


def main(argv=None) -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workers", default=",".join(map(str, WORKERS)))
    ap.add_argument("--models", default=",".join(EMULATED))
    ap.add_argument("--torch-models", default=",".join(TORCH))
    ap.add_argument("--write", metavar="YAML", help="store the medians for the simulator")
    ap.add_argument("--fabric", action="store_true",
                    help="resnet18 on the demo fabric instead (root; global fabric lock)")
    ap.add_argument("--out", default="runs/bench-suspend-fabric", help="--fabric: logs")
    ap.add_argument("--fabric-workers", default="4,8", help="--fabric: worker counts (4, 8)")
    args = ap.parse_args(argv)
    if args.fabric:
        return on_fabric(args.repeats, Path(args.out),
                         tuple(int(w) for w in args.fabric_workers.split(",")))
    workers = [int(w) for w in args.workers.split(",")]
    cases = [(m, "emulated", w) for m in args.models.split(",") if m for w in workers]
    cases += [(m, "torch", w) for m in args.torch_models.split(",") if m for w in workers if w <= 2]
    load0 = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    runner = WarmRunner(LocalRunner(), hosts=["local"], per_host=8)
    runner.wait_ready()
    rows: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-suspend-") as tmp:
            for rep in range(args.repeats):
                for i, (model, compute, w) in enumerate(cases):
                    print(f"bench: repeat {rep + 1}/{args.repeats}, case {i + 1}/{len(cases)}: "
                          f"{model} {compute} {w} worker(s)", file=sys.stderr, flush=True)
                    row = measure(model, compute, w, runner, Path(tmp) / str(rep))
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    finally:
        runner.close()
    load1 = os.getloadavg()[0]
    med = {}
    for model, compute, w in cases:
        mine = [r for r in rows if (r["model"], r["compute"], r["workers"]) == (model, compute, w)]
        med[(model, compute, w)] = {k: round(statistics.median(r[k] for r in mine), 3)
                                    for k in ("suspend_s", "resume_s", "batch_s", "state_mb")}
    print(f"\nmedian of {args.repeats}, load average {load0:.1f} before, {load1:.1f} after "
          f"({os.cpu_count()} CPUs), {started}")
    print(f"{'model':10} {'compute':8} {'workers':>7} {'suspend_s':>9} {'resume_s':>8} "
          f"{'total_s':>7} {'batch_s':>7} {'state_MB':>8}")
    for (model, compute, w), m in med.items():
        print(f"{model:10} {compute:8} {w:7d} {m['suspend_s']:9.2f} {m['resume_s']:8.2f} "
              f"{m['suspend_s'] + m['resume_s']:7.2f} {m['batch_s']:7.3f} {m['state_mb']:8.1f}")
    if args.write:
        import yaml

        doc = {"source": (f"bench/ps_runtime/bench_suspend.py --repeats {args.repeats} on {started}, "
                          f"loopback, warm processes, load average {load0:.1f}/{load1:.1f} "
                          f"({os.cpu_count()} CPUs); medians"),
               "costs": [{"model": m, "compute": c, "workers": w, **v}
                         for (m, c, w), v in med.items()]}
        Path(args.write).write_text(yaml.safe_dump(doc, sort_keys=False))
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
