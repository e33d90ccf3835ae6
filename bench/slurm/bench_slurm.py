"""The Slurm executor's costs, on a real Slurm 22.05 cluster on the Mininet fabric.

    python -m bench.slurm.bench_slurm [--repeats 5] [--foreign 1000] [--json OUT]

(root, Open vSwitch, Mininet and Debian's Slurm + munge, as `make test` sets up; it
takes the global fabric lock.) Prints:

1. submit -> first batch, the same tiny job (2 GPUs on one host, emulated compute, 5
   batches) through `sluice scheduler --executor slurm` and through `--executor local`
   (`sluice train` on this machine), median of ``--repeats``: the overhead Slurm adds.
2. the scheduler's decision time (one slot: Slurm's nodes read, the policy's decision,
   the sbatch of the jobs it starts) with ``--foreign`` jobs of another user queued
   (held) in Slurm, against the same with none queued.
3. faults: kill -9 of the scheduler service mid-run, kill -9 of slurmctld with jobs
   running: jobs lost (not finished) and jobs started twice (more than one Slurm job,
   or more than one batch-script start, per sluice job).
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench import harness
from bench.harness import ROOT as REPO
from job_scheduler.service import executor_registry
from job_scheduler.service.executor_registry import SLURM

TOPOLOGY = "two-rack"
JOB = {"model": "resnet18", "batch_size": 8, "dataset_size": 64, "epochs": 1}


class Scheduler:
    """`sluice scheduler` as its own process."""

    def __init__(self, env, work: Path, executor: str, extra: list[str], name: str):
        self.work = work
        self.db = work / f"{name}.db"
        self.log_path = work / f"{name}.log"
        self.args = ["--topology", TOPOLOGY, "--executor", executor, "--policy", "fifo",
                     "--db", str(self.db), "--listen", "127.0.0.1:0", "--slot", "0.2",
                     "--controller", env.controller_api, *extra]
        self.environ = {**os.environ, **env.cluster.env,
                        "SLUICE_CONTROLLER_TOKEN": env.admin_token}
        self.proc = None
        self.url = None

    def start(self) -> "Scheduler":
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen([sys.executable, "-m", "sluice", "scheduler", *self.args],
                                     env=self.environ, stdout=log, stderr=log, cwd=REPO)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.findall(r"listening on (http://\S+)", self.log_path.read_text())
            if len(found) >= 1 and self.proc.poll() is None and (self.url is None or
                                                                  found[-1] != self.url):
                self.url = found[-1]
                return self
            if self.proc.poll() is not None:
                raise SystemExit(f"scheduler exited: {self.log_path.read_text()[-2000:]}")
            time.sleep(0.05)
        raise SystemExit("scheduler did not start")

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)

    def submit(self, jobs: list[dict]) -> None:
        path = self.work / f"jobs-{time.monotonic_ns()}.yaml"
        path.write_text(yaml.safe_dump({"jobs": jobs}))
        r = subprocess.run([sys.executable, "-m", "sluice", "submit", str(path), "--server",
                            self.url], env=self.environ, capture_output=True, text=True, cwd=REPO)
        if r.returncode:
            raise SystemExit(f"submit failed: {r.stderr}")

    def jobs(self) -> dict[str, dict]:
        from job_scheduler.service.client import SchedulerClient

        return {j["name"]: j for j in SchedulerClient(self.url, None).jobs()}

    def wait(self, names, states=("finished",), timeout=300.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            jobs = self.jobs()
            if all(jobs.get(n, {}).get("state") in states for n in names):
                return jobs
            time.sleep(0.2)
        raise SystemExit(f"timeout waiting for {names}: {[(n, jobs.get(n, {}).get('state')) for n in names]}")

    def runs(self, executor: str) -> Path:
        return executor_registry.kind(executor).runs(self.db)


def first_batch_at(path: Path, timeout: float = 120.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if re.search(r"^batch 1 ", path.read_text(errors="replace"), re.M):
                return time.monotonic()
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit(f"no first batch in {path}")


def latency(env, work: Path, executor: str, repeats: int) -> list[float]:
    names = [f"lat-{executor}-{i}" for i in range(repeats)]
    jobs_file = work / f"lat-{executor}.yaml"
    jobs_file.write_text(yaml.safe_dump({"jobs": [{"name": n, "max_gpus": 2, **JOB}
                                                  for n in names]}))
    scale = env.topology.emulation_bw_scale
    if executor == "local":
        cmd = (f"{sys.executable} -m sluice train {jobs_file} --job {{name}} --workers {{gpus}} "
               f"--servers 1 --out {{run_dir}}/ps --quiet --compute emulated "
               f"--bw-scale {scale} --batches 5")
        extra = ["--local-command", cmd]
    else:
        extra = ["--slurm-compute", "emulated", "--slurm-batches", "5"]
    sched = Scheduler(env, work, executor, extra, f"lat-{executor}").start()
    out = []
    try:
        for k, name in enumerate(names):
            t0 = time.monotonic()
            sched.submit([{"name": name, "max_gpus": 2, **JOB}])
            log = sched.runs(executor) / f"job-{k + 1}-attempt-1" / "ps" / "worker0.log"
            out.append(first_batch_at(log) - t0)
            sched.wait([name])
    finally:
        sched.stop()
    return out


def decision_time(env, work: Path, foreign: int) -> dict:
    """In-process service (the real SlurmExecutor, store, policy), ticked by hand."""
    from job_scheduler.core.estimator import Estimator
    from job_scheduler.service.app import ServiceConfig, build_service
    from job_scheduler.service.policy_step import make_policy_step
    from job_scheduler.service.slurm_executor import SlurmJobOptions
    from topologies import load_topology

    cli_env = {**os.environ, **env.cluster.env}
    t0 = time.monotonic()
    held = []
    for i in range(foreign):
        r = subprocess.run(["sbatch", "--parsable", "--hold", "-J", f"other-{i}", "-o", "/dev/null",
                            "--gres=gpu:1", "--wrap", "true"], env=cli_env, capture_output=True,
                           text=True)
        if r.returncode:
            raise SystemExit(f"sbatch of a foreign job failed: {r.stderr}")
        held.append(r.stdout.strip())
    submit_s = time.monotonic() - t0
    pending = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%i"], env=cli_env,
                             capture_output=True, text=True).stdout.split()
    if len(pending) < foreign:                 # the figure would be about an empty queue
        raise SystemExit(f"only {len(pending)} of {foreign} foreign jobs are queued")
    os.environ.update(env.cluster.env)
    topo = load_topology(TOPOLOGY)
    est = Estimator()
    policy = make_policy_step("fifo", topo, est, slot=1.0)
    db = work / f"decide-{foreign}.db"
    config = ServiceConfig(db=db, policy="fifo", executor=SLURM, listen=("127.0.0.1", 0))
    service, server = build_service(config, topo, policy, est,
                                    SlurmJobOptions(compute="emulated", batches=3))
    server.server_close()
    slurm = service.executors[SLURM]
    cap_times = []
    real_capacity = slurm.capacity

    def timed(state, running):
        t = time.perf_counter()
        real_capacity(state, running)
        cap_times.append(time.perf_counter() - t)
    service.capacity = timed
    service.submit(yaml.safe_dump({"jobs": [{"name": f"d{i}", "max_gpus": 2, **JOB}
                                            for i in range(8)]}), "bench")
    ticks = []
    while service.store.counts()["queued"]:
        t = time.perf_counter()
        res = service.tick()
        dt = time.perf_counter() - t
        if res["started"]:
            ticks.append((dt, res["started"]))
        time.sleep(0.1)
    for job in service.store.jobs(["running"]):
        service.executors[SLURM].stop(job)
    service.store.close()
    for jid in held:
        subprocess.run(["scancel", jid], env=cli_env, capture_output=True)
    return {"foreign_queued": len(pending), "foreign_submit_s": round(submit_s, 1),
            "slot_s": [round(t, 3) for t, _ in ticks], "started_per_slot": [n for _, n in ticks],
            "capacity_read_s_median": round(statistics.median(cap_times), 4)}


def faults(env, work: Path) -> dict:
    from job_scheduler.service.slurm_names import store_tag
    from slurm_client import SlurmClient

    client = SlurmClient(env.cluster.env)
    out = {}
    for fault in ("kill9-scheduler", "kill9-slurmctld"):
        names = [f"{fault[6:9]}{i}" for i in range(5 if fault == "kill9-scheduler" else 2)]
        sched = Scheduler(env, work, SLURM, ["--slurm-compute", "emulated", "--slurm-batches",
                                               "40", "--slurm-compute-s", "0.1"], fault).start()
        sched.submit([{"name": n, "max_gpus": 3, **JOB} for n in names])
        sched.wait(names[:1], states=("running",), timeout=60)
        if fault == "kill9-scheduler":
            time.sleep(1.0)
            sched.stop(signal.SIGKILL)
            time.sleep(1.0)
            sched.start()
        else:
            jobs = sched.wait(names, states=("running",), timeout=60)
            time.sleep(5.0)      # running, and saved by slurmctld (see test_slurm_executor)
            env.cluster.kill_slurmctld()
            time.sleep(3.0)
            env.cluster.start_slurmctld()
        try:
            jobs = sched.wait(names, states=("finished", "failed", "cancelled"), timeout=300)
        finally:
            sched.stop()
        lost = sum(j["state"] != "finished" for j in jobs.values())
        twice, disagree = 0, 0
        runs = sched.runs(SLURM)
        for j in jobs.values():
            submissions = 0
            for d in runs.glob(f"job-{j['id']}-attempt-*"):
                parts = client.jobs(name=f"sluice-{store_tag(sched.db)}-{d.name}")
                submissions += len({p.leader for p in parts})
                if j["state"] == "finished" and d.name.endswith(f"attempt-{j['attempts']}") \
                        and {p.state for p in parts} != {"COMPLETED"}:
                    disagree += 1
            twice += submissions > 1 or j["attempts"] > 1
        out[fault] = {"jobs": len(names), "lost": lost, "started_twice": twice,
                      "sluice_vs_squeue_disagree": disagree}
    return out


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--foreign", type=int, default=1000)
    args = parser.parse_args()
    from end_to_end.slurm_env import slurm_environment

    result: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp:
        work = Path(tmp)
        with slurm_environment(TOPOLOGY, work / "env", progress=False) as env:
            result["bringup_s"] = env.timings
            lat = {ex: latency(env, work, ex, args.repeats) for ex in ("local", SLURM)}
            med = {ex: statistics.median(v) for ex, v in lat.items()}
            result["submit_to_first_batch_s"] = {ex: [round(x, 3) for x in v]
                                                 for ex, v in lat.items()}
            result["median_s"] = {ex: round(v, 3) for ex, v in med.items()}
            result["slurm_overhead_s"] = round(med[SLURM] - med["local"], 3)
            result["decision"] = [decision_time(env, work, 0),
                                  decision_time(env, work, args.foreign)]
            result["faults"] = faults(env, work)
    print(f"Slurm bring-up on the fabric: {result['bringup_s']}")
    print(f"submit -> first batch, median of {args.repeats} (s): local "
          f"{result['median_s']['local']:.2f}, slurm {result['median_s']['slurm']:.2f}; "
          f"Slurm adds {result['slurm_overhead_s']:.2f} s (goal < 2 s)")
    for d in result["decision"]:
        print(f"decision slot with {d['foreign_queued']} foreign jobs queued in Slurm: slots "
              f"{d['slot_s']} s (jobs started {d['started_per_slot']}), Slurm capacity read "
              f"{d['capacity_read_s_median']:.3f} s (goal < 1 s per slot)")
    for name, f in result["faults"].items():
        print(f"{name}: {f['jobs']} jobs, {f['lost']} lost, {f['started_twice']} started twice, "
              f"{f['sluice_vs_squeue_disagree']} disagreeing with squeue")
    harness.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
