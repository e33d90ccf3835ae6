"""The local Slurm cluster on the Mininet fabric (mininet_fabric/slurm_cluster.py): how long
its bring-up and teardown take, and what starting a process through Slurm costs.

    python -m bench.slurm.bench_slurm_cluster [--topology two-rack] [--repeat 5]

One environment (sluice controller + fabric + Slurm, as the tests' ``slurm_fabric``);
then ``--repeat`` times: SlurmCluster.stop() and start() on the same fabric (munged,
slurmctld, one slurmd per host, until every node is idle). Per repeat also: ``srun -w h``
(one step on a named node), a two-component heterogeneous ``srun`` across the racks, and
``sbatch`` until the job has run. Baseline, same run: the same command started directly
in the host's network namespace (``nsenter --net``), i.e. what Slurm adds on top of
starting a process there. Medians (min-max) are printed. Needs root, OVS, Mininet and
Debian's Slurm (``make setup``).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import harness



def _timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True, env=env, timeout=120)
    return time.monotonic() - t0


def _sbatch_until_done(env: dict[str, str], host: str) -> float:
    t0 = time.monotonic()
    job = subprocess.run(["sbatch", "--parsable", "-w", host, "-o", "/dev/null", "--wrap", "true"],
                         check=True, capture_output=True, text=True, env=env).stdout.strip()
    while "JobState=COMPLETED" not in subprocess.run(
            ["scontrol", "show", "job", "-o", job], capture_output=True, text=True, env=env).stdout:
        if time.monotonic() - t0 > 60:
            raise RuntimeError(f"sbatch job {job} did not complete in 60 s")
        time.sleep(0.05)
    return time.monotonic() - t0


def _row(name: str, xs: list[float]) -> str:
    return f"| {name} | {statistics.median(xs):.2f} | {min(xs):.2f}-{max(xs):.2f} | {len(xs)} |"


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--topology", default="two-rack")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from end_to_end.slurm_env import slurm_environment

    r: dict[str, list[float]] = {k: [] for k in (
        "bringup", "teardown", "srun", "srun_het", "sbatch", "nsenter")}
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp:
        t0 = time.monotonic()
        with slurm_environment(args.topology, Path(tmp), progress=False) as env:
            first = time.monotonic() - t0
            cluster, hosts = env.cluster, env.cluster.hosts
            a, b = hosts[0], hosts[-1]
            for i in range(args.repeat):
                if i:
                    cluster.stop()
                    r["teardown"].append(cluster.teardown_s)
                    cluster.start()
                r["bringup"].append(cluster.bringup_s)
                senv = {**os.environ, **cluster.env}
                pid = env.fabric.host(b).pid
                r["nsenter"].append(_timed(["nsenter", f"--net=/proc/{pid}/ns/net", "hostname"]))
                r["srun"].append(_timed(["srun", "-w", b, "hostname"], senv))
                r["srun_het"].append(_timed(["srun", "-w", a, "hostname", ":", "-w", b, "hostname"], senv))
                r["sbatch"].append(_sbatch_until_done(senv, b))
            t1 = time.monotonic()
        env_teardown = time.monotonic() - t1
    r["teardown"].append(cluster.teardown_s)
    print(f"topology {args.topology}: {len(hosts)} Slurm nodes; first environment "
          f"(controller + fabric + Slurm) up in {first:.1f} s, all of it down in "
          f"{env_teardown:.1f} s")
    print("| step | median s | min-max s | n |\n|---|---|---|---|")
    print(_row("Slurm bring-up (munged, slurmctld, slurmds, all nodes idle)", r["bringup"]))
    print(_row("Slurm teardown (every daemon and job process killed, state removed)", r["teardown"]))
    print(_row(f"baseline: `nsenter --net` {b} `hostname`", r["nsenter"]))
    print(_row(f"`srun -w {b} hostname`", r["srun"]))
    print(_row(f"heterogeneous `srun -w {a} : -w {b}`", r["srun_het"]))
    print(_row(f"`sbatch -w {b} --wrap true` until COMPLETED", r["sbatch"]))
    base = statistics.median(r["nsenter"])
    print(f"Slurm adds {statistics.median(r['srun']) - base:.2f} s to starting a process on a "
          f"named host (srun), {statistics.median(r['srun_het']) - base:.2f} s for a "
          f"heterogeneous two-host step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
