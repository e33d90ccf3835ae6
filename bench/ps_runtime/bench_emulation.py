"""The emulated PS runtime's own costs on this machine (loopback, no fabric).

    .venv/bin/python -m bench.ps_runtime.bench_emulation [--json]

1. Start-up: launch -> every worker's first batch of a 1-server, 3-worker emulated job,
   with cold processes (each imports MXNet) against pre-started ones (ps_runtime.warm),
   measured in the same run (ratio warm / cold).
2. Per-round sync: median iteration time minus the compute wait of a 3-worker job
   (googlenet-sized batch: 205 ms compute, 26.5 KB pushed and pulled) -- the estimator's
   ``sync_s`` (ps_runtime.calibration).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from sluice_common.jobspec import JobSpec
from ps_runtime.launcher import LineFollower, PSJob, WorkerOptions, parse_batches
from ps_runtime.plan import HostPlan
from ps_runtime.runners import LocalRunner
from ps_runtime.warm import WarmRunner
from ps_runtime.ports import free_port_block as free_base

from bench import harness

SPEC = JobSpec(name="bench-emu", model="googlenet", dataset_size=64, epochs=1, batch_size=512,
               max_gpus=3)




def run_job(runner, out: Path, batches: int, compute_s: float, nbytes: int) -> tuple[float, list]:
    """(launch -> every worker's first batch, per-batch records)."""
    job = PSJob(SPEC, HostPlan.loopback(1, 3), runner, out, batches=batches, base_port=free_base(),
                options=WorkerOptions(compute="emulated", bw_scale=0.001, compute_s=compute_s,
                                      bytes_per_batch=nbytes))
    with job:
        t0 = time.monotonic()
        job.start()
        followers = {p.rank: LineFollower(p.log_path) for p in job.workers}
        first: dict[int, float] = {}
        while len(first) < len(followers):
            for rank, f in followers.items():
                if rank not in first and any(True for _ in parse_batches(f.new_lines())):
                    first[rank] = time.monotonic() - t0
            job.poll()
            time.sleep(0.02)
        result = job.wait(timeout=300)
    return max(first.values()), [r for recs in result.batches.values() for r in recs[2:]]


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        cold = [run_job(LocalRunner(), Path(tmp) / f"cold{k}", 3, 0.0, 4)[0] for k in range(args.reps)]
        warm_runner = WarmRunner(LocalRunner(), ["local"], per_host=6)   # >= the job's 5 processes
        try:
            warm = []
            for k in range(args.reps):
                warm_runner.wait_ready()
                warm.append(run_job(warm_runner, Path(tmp) / f"warm{k}", 3, 0.0, 4)[0])
            warm_runner.wait_ready()
            _, recs = run_job(warm_runner, Path(tmp) / "sync", 60, 0.2046, 26_500)
        finally:
            warm_runner.close()
    over = [r.time_s - 0.2046 for r in recs]
    out = {"load_avg_1m_before": round(load, 2), "load_avg_1m_after": round(os.getloadavg()[0], 2),
           "startup_cold_median_s": round(statistics.median(cold), 2),
           "startup_warm_median_s": round(statistics.median(warm), 2),
           "startup_warm_over_cold": round(statistics.median(warm) / statistics.median(cold), 3),
           "sync_median_s": round(statistics.median(over), 4),
           "sync_mean_s": round(statistics.fmean(over), 4)}
    harness.figure("start-up, pre-started processes", out["startup_warm_median_s"], "s",
                   baseline=out["startup_cold_median_s"], note="(baseline: cold processes)")
    harness.figure("per-round sync beyond the bytes", out["sync_median_s"] * 1e3, "ms")
    if args.json:
        harness.write_json(args.json, out)
    else:
        for k, v in out.items():
            print(f"{k:28} {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
