"""Filling a warm pool: every process imports MXNet, against forking them from one fork
server that imported once (``ps_runtime.zygote``: the demo's wall time).

    .venv/bin/python -m bench.ps_runtime.bench_warm_fill [--quick] [--json]

On one local "host", in the same run:

1. the first fill of a pool of N processes (the demo's start): N imports, against one
   import in the fork server and N forks (ratio fork / import);
2. a refill of the same N after a pass took them (the demo's between-arms refill): N
   imports again, against N forks;
3. launch -> every worker's first batch of a 1-server, 3-worker emulated job whose
   processes come from each pool (median of 3), and the median iteration of a longer
   job: a forked process must be no slower to become a job's process, nor to run it,
   than an imported one (the JCTs the demo measures include both).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from ps_runtime.runners import LocalRunner
from ps_runtime.warm import WarmRunner

from bench import harness
from bench.ps_runtime.bench_emulation import run_job

REPS = 3        # job start-ups per pool (median)
ITER_BATCHES = 150   # a longer job: its median iteration, forked against imported processes


def _fill_s(runner: WarmRunner) -> float:
    t0 = time.monotonic()
    runner.fill()
    ready = runner.wait_ready(timeout=300)
    took = time.monotonic() - t0
    assert ready == sum(runner.sizes.values()), f"{ready} of {runner.sizes} ready"
    return took


def _take_all(runner: WarmRunner) -> None:
    """Empty the pool as a pass does (the taken processes are closed, not run)."""
    for pool in runner.idle.values():
        while pool:
            proc = pool.popleft()
            for pipe in (proc.stdin, proc.stdout):
                pipe.close()                     # EOF: a warm process exits by itself
            proc.wait(timeout=30)


def measure(n: int, fork: bool, out: Path) -> dict:
    """(first fill, refill, job start-up) seconds with a pool of ``n`` processes."""
    t0 = time.monotonic()
    runner = WarmRunner(LocalRunner(), ["local"], per_host=n, refill=False, fork=fork)
    try:
        runner.wait_ready(timeout=300)
        first = time.monotonic() - t0
        _take_all(runner)
        refill = _fill_s(runner)
        startups = []
        for k in range(REPS):                    # the job takes 5 of the pool; refilled between
            startups.append(run_job(runner, out / str(k), batches=3, compute_s=0.01,
                                    nbytes=4000)[0])
            _fill_s(runner)
        _, records = run_job(runner, out / "steady", batches=ITER_BATCHES, compute_s=0.02,
                             nbytes=400_000)
    finally:
        runner.close()
    return {"first": first, "refill": refill, "startup": statistics.median(startups),
            "iteration": statistics.median(r.time_s for r in records)}


def main(argv: list[str] | None = None) -> int:
    args = harness.parser(__doc__, quick="a pool of 6 instead of 12").parse_args(argv)
    n = 6 if args.quick else 12                  # >= the job's 5 processes: none cold
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        imported = measure(n, False, Path(tmp) / "import")
        forked = measure(n, True, Path(tmp) / "fork")
    figures = [
        harness.figure(f"first fill of {n} warm processes, fork server", forked["first"], "s",
                       baseline=imported["first"], note="(baseline: each imports MXNet)"),
        harness.figure(f"refill of {n} warm processes, fork server", forked["refill"], "s",
                       baseline=imported["refill"], note="(baseline: each imports MXNet)"),
        harness.figure("launch -> first batch of 3 workers, forked processes",
                       forked["startup"], "s", baseline=imported["startup"],
                       note="(baseline: imported warm processes; median of 3)"),
        harness.figure("median iteration of 3 workers, forked processes",
                       forked["iteration"] * 1000, "ms", baseline=imported["iteration"] * 1000,
                       note=f"(baseline: imported warm processes; {ITER_BATCHES} batches, "
                            "20 ms compute, 400 kB a batch)"),
    ]
    print(f"load average before {load[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    if args.json:
        harness.write_json(args.json, {"pool": n, "figures": figures,
                                     "load_avg_1m_before": load[0]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
