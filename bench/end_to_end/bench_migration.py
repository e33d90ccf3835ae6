"""One migration in a real run, side by side with the same run without it.

    sudo .venv/bin/python -m bench.end_to_end.bench_migration [--out DIR]

The same two-job `sluice run` twice on a Mininet fabric (global fabric lock), fifo with
first fit, emulated compute, same seeds: `filler` (3 GPUs) takes h1 and one GPU of h2,
so `moved` (alexnet, 2 GPUs) lands across the racks (h2 + h3) and its push/pull crosses
the oversubscribed uplinks (10:1 here, so that the estimator's remaining time in place
and on one host differ); `other` (3 GPUs) then fills rack 2 (h3, h4). When `filler`
ends, rack 1 frees up:

- run A (`--migrate`): `moved` is suspended at a batch boundary and resumed on one host;
- run B (no migration): `moved` stays across the racks.

Prints `moved`'s turnaround in both runs, the migration's suspend/resume seconds and
the ratio; the reports stay under --out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from bench import harness
from bench.harness import ROOT as REPO

SLUICE = str(Path(sys.executable).parent / "sluice")

TOPOLOGY = {
    "name": "two-rack-slow-uplinks",
    "emulation": {"bw_scale": 0.001},       # Mininet: 100 Mbit/s hosts, 10 Mbit/s uplinks
    "switches": [{"name": "tor1", "role": "tor"}, {"name": "tor2", "role": "tor"},
                 {"name": "spine1", "role": "spine"}],
    "racks": [{"name": "rack1", "tor": "tor1"}, {"name": "rack2", "tor": "tor2"}],
    "hosts": [{"name": f"h{i}", "rack": "rack1" if i <= 2 else "rack2", "gpus": 2, "bw": 100000}
              for i in range(1, 5)],
    "links": [{"a": "tor1", "b": "spine1", "bw": 10000}, {"a": "tor2", "b": "spine1", "bw": 10000}],
}
JOBS = {"jobs": [
    {"name": "filler", "model": "resnet18", "dataset_size": 32 * 3 * 80, "epochs": 1,
     "batch_size": 32, "max_gpus": 3, "arrival": 0},
    {"name": "moved", "model": "alexnet", "dataset_size": 32 * 2 * 200, "epochs": 1,
     "batch_size": 32, "max_gpus": 2, "arrival": 1},
    {"name": "other", "model": "resnet18", "dataset_size": 32 * 3 * 400, "epochs": 1,
     "batch_size": 32, "max_gpus": 3, "arrival": 1},
]}


def run(out: Path, topo: Path, jobs: Path, migrate: bool) -> dict:
    cmd = [SLUICE, "run", str(jobs), "--topology", str(topo), "--policy", "fifo",
           "--compute", "emulated", "--priority", "on", "--out", str(out), "--job-timeout", "400"]
    if migrate:
        cmd.append("--migrate")
    print(f"bench: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    (out.parent / f"{out.name}.stderr.log").write_text(proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"sluice run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads((out / "report.json").read_text())


def main(argv=None) -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--out", default=f"runs/bench-migration-{time.strftime('%Y%m%d-%H%M%S')}")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    topo, jobs = out / "topology.yaml", out / "jobs.yaml"
    topo.write_text(yaml.safe_dump(TOPOLOGY, sort_keys=False))
    jobs.write_text(yaml.safe_dump(JOBS, sort_keys=False))
    load0 = os.getloadavg()[0]
    results = {"migrate": run(out / "migrate", topo, jobs, True),
               "stay": run(out / "stay", topo, jobs, False)}
    rows = {}
    for mode, r in results.items():
        moved = {j["name"]: j for j in r["jobs"]}["moved"]
        rows[mode] = {"turnaround_s": moved["turnaround"], "status": moved["status"],
                      "hosts": moved.get("worker_hosts"), "migrations": r["summary"].get("migrations", 0),
                      "preemptions": r.get("preemptions", [])}
    print(json.dumps(rows, indent=1))
    a, b = rows["migrate"]["turnaround_s"], rows["stay"]["turnaround_s"]
    mig = next((p for p in rows["migrate"]["preemptions"] if p["why"] == "migrate"), None)
    print(f"\nmoved (alexnet, 2 GPUs): turnaround {a:.1f} s with migration vs {b:.1f} s left "
          f"across the racks ({b / a:.2f}x); migrations {rows['migrate']['migrations']}"
          + (f", moved {mig['from_hosts']} -> {mig.get('to_hosts')} after batch {mig['batch']}, "
             f"suspend {mig['suspend_s']:.2f} s, resume {mig.get('resume_s', float('nan')):.2f} s"
             if mig else "")
          + f"; load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
