"""The demo's predictions, made again by the code as it is now on stored ``sluice demo``
runs: each arm's predicted average JCT and its worst job against what the run measured.

    .venv/bin/python -m bench.end_to_end.bench_predictions RUN_DIR... [--json [OUT]]

A run is a ``sluice demo --out`` directory (``comparison.json`` and ``workload.yaml``).
Each arm's dry run (``end_to_end.demo_arms.predictions``: the arm's own scheduling loop
on a virtual clock with the exchange model as its executor, the demo's configuration) is
made again on the run's workload and set against the arm's measured JCTs, beside the
prediction the run itself recorded. So a change to the model can be judged on every
stored run before any new one is spent on it. The counts at the end are the demo
checker's bounds (``end_to_end.demo_bounds``: an arm's predicted average within 5 % of the
measured one, every job within 15 %), counted per arm, not judged: a verdict is three
runs of a seed no model change has seen.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from bench import harness
from end_to_end import run as run_mod
from end_to_end.arms import ALL_ARMS, parse_arms
from end_to_end.demo_arms import predictions
from end_to_end.demo_bounds import ARM_PREDICTION_PCT, JOB_PREDICTION_PCT
from sluice_common.errors import InputError
from sluice_common.jobspec import load_jobs
from topologies import load_topology


def pct(measured: float, predicted: float) -> float:
    return 100.0 * (predicted / measured - 1.0)


def run_rows(run_dir: Path, topology, config, arms) -> list[dict]:
    """One row per arm the run measured: the arm's error now and as recorded, its worst job."""
    try:
        cmp = json.loads((run_dir / "comparison.json").read_text())
        jobs = load_jobs(run_dir / "workload.yaml")
    except (OSError, ValueError) as err:
        raise InputError(str(run_dir), f"not a stored demo run ({err})") from err
    _, predicted = predictions(topology, jobs, config, [a for a in arms if a.key in cmp["arms"]])
    rows = []
    for key, now in predicted.items():
        measured = {n: j["jct_s"] for n, j in cmp["arms"][key]["jobs"].items()}
        recorded = {n: j["predicted_jct_s"] for n, j in cmp["arms"][key]["jobs"].items()}
        avg = statistics.mean(measured.values())
        worst = max(measured, key=lambda n: abs(pct(measured[n], now[n])))
        rows.append({"run": run_dir.name, "arm": key,
                     "arm_pct": round(pct(avg, statistics.mean(now[n] for n in measured)), 1),
                     "recorded_arm_pct": round(pct(avg, statistics.mean(recorded.values())), 1),
                     "worst_job": worst,
                     "worst_job_pct": round(pct(measured[worst], now[worst]), 1)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    args = ap.parse_args(argv)
    topology = load_topology(run_mod.DEMO_TOPOLOGY)
    config = run_mod.RunConfig(jobs=str(run_mod.DEMO_JOBS), topology=run_mod.DEMO_TOPOLOGY,
                               compute="emulated")
    arms = parse_arms(ALL_ARMS)
    rows = []
    try:
        for run_dir in args.runs:
            got = run_rows(run_dir, topology, config, arms)
            rows += got
            print(f"{run_dir.name}: " + " | ".join(
                f"{r['arm']} {r['arm_pct']:+.1f} % (recorded {r['recorded_arm_pct']:+.1f} %), "
                f"worst {r['worst_job']} {r['worst_job_pct']:+.1f} %" for r in got), flush=True)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    arm_ok = sum(abs(r["arm_pct"]) <= ARM_PREDICTION_PCT for r in rows)
    job_ok = sum(abs(r["worst_job_pct"]) <= JOB_PREDICTION_PCT for r in rows)
    figures = [harness.figure("arms within the arm bound", arm_ok, f"of {len(rows)}"),
               harness.figure("arms with every job within the job bound", job_ok,
                              f"of {len(rows)}")]
    if args.json:
        harness.write_json(args.json, {"rows": rows, "figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
