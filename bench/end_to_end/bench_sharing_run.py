"""Time-slicing (with grow/shrink at resume) and packing of real PS jobs: average JCT
with and without, side by side in one invocation.

    .venv/bin/python -m bench.end_to_end.bench_sharing_run [--out /tmp/sharing] [--quantum 5]

Real ps-lite jobs (emulated compute: 30 ms per batch, 4 KB exchanged) under the real run
loop (end_to_end.runloop with job_scheduler.core.mechanisms) and the real ``lyapunov`` policy, on one host at a
loopback address (no Mininet fabric: the processes run on this machine, as in
tests/unit/end_to_end/test_runloop_sharing.py), two scenarios, each run without and with the option:

- ``time-slice`` (2 GPUs): ``long`` (googlenet, lyapunov gives it both GPUs) starts
  alone; ``short`` (1 GPU) arrives 3 s later. Without: it waits for ``long``. With
  ``--time-slice``: ``long`` yields after a quantum; ``short`` starts, and ``long``
  resumes on the GPU left (a shrink: its remaining samples on one worker).
- ``pack`` (1 GPU): ``p0`` (1 GPU) starts alone; ``p1`` (1 GPU) arrives 2 s later.
  Without: it waits. With ``--pack``: it shares p0's GPU, its compute slowed by the
  assumed factor (job_scheduler/core/mechanisms.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

from end_to_end.runloop import RealTimeRun
from end_to_end.run_options import RunOptions
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.mechanisms import MechanismOptions
from job_scheduler.core.policies import make_policy
from ps_runtime.runners import LocalRunner
from ps_runtime.worker_overrides import WorkerOverrides
from sluice_common.jobspec import JobSpec
from topologies import load_topology

from bench import harness

EMULATED = {"*": WorkerOverrides(compute_s=0.03, bytes_per_batch=4096)}


class NoController:
    def links(self):
        return {"ports": []}


def one_host(where: Path, gpus: int):
    doc = {"name": f"lo-{gpus}gpu", "switches": [{"name": "t1", "role": "tor"}],
           "racks": [{"name": "r1", "tor": "t1"}],
           "hosts": [{"name": "h1", "rack": "r1", "gpus": gpus, "bw": 10000, "ip": "127.0.1.1"}]}
    path = where / f"topo-{gpus}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_topology(str(path))


def scenario(name: str) -> tuple[int, list[JobSpec]]:
    if name == "time-slice":
        return 2, [JobSpec(name="long", model="googlenet", dataset_size=2 * 4 * 600, epochs=1,
                           batch_size=4, max_gpus=2, arrival=0.0),
                   JobSpec(name="short", model="googlenet", dataset_size=4 * 60, epochs=1,
                           batch_size=4, max_gpus=1, arrival=3.0)]
    return 1, [JobSpec(name="p0", model="googlenet", dataset_size=4 * 400, epochs=1,
                       batch_size=4, max_gpus=1, arrival=0.0),
               JobSpec(name="p1", model="googlenet", dataset_size=4 * 60, epochs=1,
                       batch_size=4, max_gpus=1, arrival=2.0)]


def run_once(out: Path, name: str, on: bool, quantum: float, port: int) -> dict:
    gpus, jobs = scenario(name)
    topo = one_host(out, gpus)
    est = Estimator()
    options = RunOptions(priority=False, slot_s=0.5, compute="emulated",
                         worker_overrides=EMULATED,
                         job_timeout_s=600, port_base=port)
    kw = {}
    if on:
        kw = {"time_slice": quantum} if name == "time-slice" else {"pack": True}
    loop = RealTimeRun(topo, jobs, make_policy("lyapunov"), est, None,
                       NoController(), out / f"{name}-{'on' if on else 'off'}", options,
                       policy_name="lyapunov", runner=LocalRunner(),
                       mechanisms=MechanismOptions(**kw).build(), can_suspend=True)
    result = loop.run()
    s = result["summary"]
    return {"scenario": name, "option": on, "finished": s["finished"],
            "avg_jct_s": s["avg_jct_s"], "time_slices": s.get("time_slices", 0),
            "grows": s.get("grows", 0), "shrinks": s.get("shrinks", 0),
            "packed": s.get("packed", 0),
            "jct": {j["name"]: j.get("turnaround") for j in result["jobs"]},
            "gpus": {d["job"]: d["gpus"] for d in result["decisions"]},
            "interruptions": [p.get("interruption_s") for p in result["preemptions"]]}


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    ap.add_argument("--quantum", type=float, default=5.0)
    ap.add_argument("--scenarios", default="time-slice,pack")
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="sluice-sharing-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    port = 34000
    for name in args.scenarios.split(","):
        for on in (False, True):
            load = os.getloadavg()[0]
            row = run_once(out, name, on, args.quantum, port)
            port += 2000
            row["load_before"] = round(load, 2)
            row["load_after"] = round(os.getloadavg()[0], 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    for name in args.scenarios.split(","):
        off, on = [r for r in rows if r["scenario"] == name]
        if off["avg_jct_s"] and on["avg_jct_s"]:
            print(f"{name}: avg JCT {off['avg_jct_s']:.1f} s without, {on['avg_jct_s']:.1f} s "
                  f"with ({on['avg_jct_s'] / off['avg_jct_s']:.2f}x); time slices "
                  f"{on['time_slices']}, grows {on['grows']}, shrinks {on['shrinks']}, "
                  f"packed {on['packed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
