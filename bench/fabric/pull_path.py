"""The pull path under contention: an urgent job's per-batch time with
its pulls held behind its pushes (window 0) and with a window of keys in flight.

    sudo .venv/bin/python -m bench.fabric.pull_path [--reps N] [--json [OUT]]

ps-lite sends a key's pull request on the worker's one connection to the server, behind
every push already queued there, and the server answers it once that key's push is in.
With every key pushed at once (window 0) no pull starts before the last push has left:
push and pull use the two directions of the path one after the other. With a window of
``w`` keys in flight (``--pipeline-keys``, ``ps_runtime.emulated_worker``) each pull
request leaves behind at most ``w`` pushes, so pulls overlap later pushes.

On the heavy-tail experiment's fabric (two-rack, uplinks 12 Mbit/s, host links 24
Mbit/s, the HTB priority tree) and through its run loop (controller process, warm PS
processes, the experiment's fixed placement: PS in rack 1, worker in rack 2), the urgent
job U (400 kB in 8 keys, no compute, 12 batches) runs alone, and 2 s after a bulk job B
(900 kB in 8 keys, window 0, 25 batches: it covers U's run) with priority off (one FIFO
class) and on (the `remaining` rule: U, with less left, in the higher class), each with
window 0 and with the heavy-tail experiment's 3 keys, ``--reps`` times, in alternating
order. Prints U's median iteration per case and the window's ratio to window 0 in each
case (the baseline, measured in the same run). Needs root (the fabric) and takes the
fabric lock; about 6 minutes with 2 reps.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from bench import harness
from mininet_tests.calibration.runs import UPLINK_MBPS, loadavg, run_mix

URGENT = ("pp-urgent", 400_000, 12)          # name, bytes per batch, batches
BULK = ("pp-bulk", 900_000, 25)
WINDOWS = (0, 3)
CASES = ("alone", "off", "on")               # U alone; beside B, priority off / on


def mix(case: str, window: int, rep: int):
    """The run's jobs (MixJob: no compute) and their worker overrides (the window)."""
    from mininet_tests.heavy_tail.fabric_setup import specs_and_overrides
    from mininet_tests.heavy_tail.mix import MixJob

    tag = f"-{case}-w{window}-{rep}"
    jobs = [MixJob(URGENT[0] + tag, 2.0 if case != "alone" else 0.0, URGENT[2], URGENT[1],
                   1.0, 0.0)]
    if case != "alone":
        jobs.insert(0, MixJob(BULK[0] + tag, 0.0, BULK[2], BULK[1], 1.0, 0.0))
    _, overrides = specs_and_overrides(jobs)
    overrides = {name: replace(o, pipeline_keys=window if name.startswith(URGENT[0]) else 0)
                 for name, o in overrides.items()}
    return jobs, overrides


def measure(reps: int) -> dict[tuple[str, int], list[float]]:
    """(case, window) -> U's median iteration (s, after SKIP batches) of each repetition."""
    from end_to_end.run import environment, warm_processes
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology, machine_cc, topology_arg
    from sluice_common.rank_rules import DEFAULT_RULE

    topology, _ = experiment_topology(UPLINK_MBPS)
    out = Path(tempfile.mkdtemp(prefix="sluice-pullpath-"))
    got: dict[tuple[str, int], list[float]] = {}
    k = 0
    with _removed(out), \
            environment(topology, topology_arg(topology, out), out, rank=DEFAULT_RULE,
                        tcp_congestion=machine_cc()) as (fabric, client), \
            warm_processes(topology, fabric, "emulated", refill=False, timeout_s=900,
                           per_host=4) as runner:
        for rep in range(reps):
            for case in CASES:
                for window in (WINDOWS if rep % 2 == 0 else WINDOWS[::-1]):
                    jobs, overrides = mix(case, window, rep)
                    ran = run_mix(topology, fabric, client, runner,
                                  out / f"{case}-w{window}-{rep}", jobs, case == "on",
                                  20000 + 400 * k, overrides)
                    k += 1
                    urgent = next(v for n, v in ran["jobs"].items() if n.startswith(URGENT[0]))
                    got.setdefault((case, window), []).append(urgent["iteration_s"])
                    print(f"pull path: {case}, window {window}, rep {rep + 1}: "
                          f"{1000 * got[case, window][-1]:.1f} ms per batch (load {loadavg()})",
                          file=sys.stderr, flush=True)
    return got


@contextmanager
def _removed(path: Path):
    """The runs' directory (job logs), removed on the way out, also on failure."""
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--reps", type=int, default=2, help="repetitions of each case (default 2)")
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("argument --reps: must be >= 1")
    started, load_before = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), loadavg()
    got = measure(args.reps)
    med = {k: statistics.median(v) for k, v in got.items()}
    print("| U | window | U ms per batch (median of reps) | reps ms |")
    print("|---|---:|---:|---|")
    for (case, window), v in sorted(got.items()):
        print(f"| {case} | {window} | {1000 * med[case, window]:.1f} | "
              f"{', '.join(f'{1000 * x:.0f}' for x in v)} |")
    label = {"alone": "alone", "off": "beside bulk, priority off",
             "on": "beside bulk, priority on"}
    figures = [harness.figure(f"urgent batch, {label[case]}, window {WINDOWS[1]}",
                              1000 * med[case, WINDOWS[1]], "ms",
                              baseline=1000 * med[case, WINDOWS[0]],
                              note=f"(baseline: window {WINDOWS[0]}, same run)")
               for case in CASES]
    print(f"{started}; load average before {load_before}, after {loadavg()}", flush=True)
    harness.write_json(args.json, {"figures": figures, "started": started,
                                   "cases": {f"{c}-w{w}": v for (c, w), v in got.items()}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
