"""PS overhead: step time of a real 2-worker, 1-server ps-lite job on loopback against a
single-process training loop of the same model and batch size, measured in the same run.

    .venv/bin/python -m bench.ps_runtime.bench_ps_overhead [--models smallcnn,resnet18] [--batch-size 32]
                                                [--batches 30] [--threads 1]

ratio = median PS worker step / median single-process step; "comm" is the median of the
worker's own push+pull time (``comm_s``, waiting for the other worker included). Both sides use the same
torch thread count per process. The PS step includes: flattening gradients into
buckets, push to the server, the server's sum, pull, copy back, optimizer step — and,
on a small shared CPU, the other worker and the server competing for the same cores
(printed load average says how busy the machine was).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile

import torch

from sluice_common.jobspec import JobSpec
from ps_runtime.launcher import PSJob, WorkerOptions
from ps_runtime.models import build_model, parameter_count
from ps_runtime.plan import HostPlan
from ps_runtime.profiler import measure_step
from ps_runtime.runners import LocalRunner

from bench import harness


def single_process_steps(model: str, batch_size: int, repeats: int, input_size: int) -> float:
    return measure_step(model, batch_size, torch.device("cpu"), input_size, warmup=3,
                        repeats=repeats)


def ps_steps(model: str, batch_size: int, batches: int, threads: int, input_size: int,
             base_port: int) -> tuple[float, float, float]:
    spec = JobSpec(name=f"bench-{model}", model=model, dataset_size=batches * batch_size * 2,
                   epochs=1, batch_size=batch_size, max_gpus=2)
    with tempfile.TemporaryDirectory() as out:
        job = PSJob(spec, HostPlan.loopback(1, 2), LocalRunner(), out, batches=batches,
                    base_port=base_port,
                    options=WorkerOptions(threads=threads, input_size=input_size))
        with job:
            job.start()
            result = job.wait(timeout=1800, on_batch=lambda w, r: print(
                f"  worker {w} batch {r.batch}/{batches} {r.time_s * 1000:.0f} ms",
                file=sys.stderr) if r.batch % 10 == 0 else None)
    records = [r for recs in result.batches.values() for r in recs[3:]]  # skip warm-up
    return (statistics.median(r.time_s for r in records),
            statistics.median(r.comm_s for r in records), result.elapsed_s)


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--models", default="smallcnn,resnet18")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--input-size", type=int, default=64)
    ap.add_argument("--base-port", type=int, default=47000)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"PS overhead, batch size {args.batch_size}, {args.batches} batches, "
          f"{args.threads} torch thread(s) per process, {os.cpu_count()} CPUs, "
          f"load average before {os.getloadavg()[0]:.2f}")
    print(f"{'model':<10} {'params':>10} {'MB/push':>8} {'single ms':>10} {'PS ms':>9} "
          f"{'comm ms':>8} {'ratio':>6} {'job wall s':>10}")
    for i, model in enumerate(m.strip() for m in args.models.split(",")):
        params = parameter_count(build_model(model, input_size=args.input_size))
        print(f"[{model}] single-process loop...", file=sys.stderr)
        single = single_process_steps(model, args.batch_size, max(5, args.batches // 2),
                                      args.input_size)
        print(f"[{model}] 2 workers + 1 server...", file=sys.stderr)
        ps, comm, wall = ps_steps(model, args.batch_size, args.batches, args.threads,
                            args.input_size, args.base_port + 50 * i)
        print(f"{model:<10} {params:>10,} {params * 4 / 2 ** 20:>8.1f} {single * 1000:>10.1f} "
              f"{ps * 1000:>9.1f} {comm * 1000:>8.1f} {ps / single:>6.2f} {wall:>10.1f}",
              flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
