"""`sluice scheduler --executor slurm` as its own process on the ``slurm_fabric`` fixture's
cluster (tests/fabric/slurm/conftest.py's ``sched_factory`` starts it and cleans Slurm up
after each test), and where a job's processes say they ran."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_client import SlurmClient

SLURM_TOPOLOGY = "two-rack"          # 4 hosts x 4 GPUs, h1 h2 | h3 h4
BATCHES = 6


class Scheduler:
    """`sluice scheduler --executor slurm` as its own process (kill -9 able)."""

    def __init__(self, env, tmp: Path, *, batches: int = BATCHES, compute_s: float = 0.1,
                 max_retries: int = 0, db: Path | None = None):
        self.env_fab = env
        self.tmp = tmp
        self.db = db or tmp / "sched.db"
        self.args = ["--topology", SLURM_TOPOLOGY, "--executor", "slurm", "--policy", "fifo",
                     "--db", str(self.db), "--listen", "127.0.0.1:0", "--slot", "0.5",
                     "--slurm-poll-interval", "0.5",
                     "--controller", env.controller_api, "--max-retries", str(max_retries),
                     "--slurm-compute", "emulated", "--slurm-batches", str(batches),
                     "--slurm-compute-s", str(compute_s), "--slurm-bytes-per-batch", "300000"]
        self.environ = {**os.environ, **env.cluster.env,
                        "SLUICE_CONTROLLER_TOKEN": env.admin_token}
        self.proc = None
        self.url = None
        self.starts = 0

    def start(self) -> "Scheduler":
        self.starts += 1
        log = open(self.tmp / f"scheduler-{self.starts}.log", "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "sluice", "scheduler", *self.args],
                                     env=self.environ, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = (self.tmp / f"scheduler-{self.starts}.log").read_text()
            m = re.search(r"listening on (http://\S+)", text)
            if m:
                self.url = m.group(1)
                return self
            if self.proc.poll() is not None:
                pytest.fail(f"scheduler exited {self.proc.returncode}: {text[-2000:]}")
            time.sleep(0.1)
        pytest.fail("scheduler did not start")

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill9()

    def log(self) -> str:
        return "".join(p.read_text() for p in sorted(self.tmp.glob("scheduler-*.log")))

    def submit(self, jobs: list[dict]) -> dict[str, int]:
        import yaml

        path = self.tmp / f"jobs-{time.monotonic_ns()}.yaml"
        path.write_text(yaml.safe_dump({"jobs": jobs}))
        out = subprocess.run([sys.executable, "-m", "sluice", "submit", str(path), "--server",
                              self.url], env=self.environ, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        return {k: int(v) for k, v in re.findall(r"([\w.-]+)=(\d+)", out.stdout.split(":", 2)[-1])}

    def jobs(self) -> dict[str, dict]:
        from job_scheduler.service.client import SchedulerClient

        return {j["name"]: j for j in SchedulerClient(self.url, None).jobs()}

    def job(self, job_id: int) -> dict:
        from job_scheduler.service.client import SchedulerClient

        return SchedulerClient(self.url, None).job(job_id)

    def wait(self, names, states=("finished",), timeout: float = 150.0, ready=None) -> dict:
        """Until every job named is in one of ``states`` (and ``ready(job)``: e.g. its
        Slurm job id recorded, which follows 'running' by one sbatch)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            jobs = self.jobs()
            if all(jobs.get(n, {}).get("state") in states and (ready is None or ready(jobs[n]))
                   for n in names):
                return jobs
            bad = [n for n in names if jobs.get(n, {}).get("state") in
                   {"finished", "failed", "cancelled"} - set(states)]
            assert not bad, f"{bad}: {[(jobs[n]['state'], jobs[n]['reason']) for n in bad]}"
            time.sleep(0.3)
        pytest.fail(f"jobs {names} not {states} in {timeout} s: "
                    f"{[(n, jobs.get(n, {}).get('state')) for n in names]}\n{self.log()[-3000:]}")


def tiny(name: str, gpus: int) -> dict:
    return {"name": name, "model": "resnet18", "batch_size": 8, "dataset_size": 64, "epochs": 1,
            "max_gpus": gpus}


def run_dir(sched: Scheduler, job: dict) -> Path:
    """The job's run directory for its attempt. A directory left by a scheduler killed
    before its sbatch is never reused: the executor then takes ``...-attempt-N.K``, so
    the one in use is the latest that holds a plan."""
    base = sched.db.parent / (sched.db.name + ".slurm-runs") / f"job-{job['id']}-attempt-{job['attempts']}"
    used = [d for d in (base, *base.parent.glob(base.name + ".*")) if (d / "plan.json").exists()]
    return max(used, key=lambda d: int(d.suffix[1:]) if d.suffix else 0, default=base)


def ran_on(sched: Scheduler, job: dict) -> dict[str, dict]:
    d = run_dir(sched, job) / "ran_on"
    return {p.stem: json.loads(p.read_text()) for p in d.glob("*.json")}


def slurm(env) -> SlurmClient:
    return SlurmClient(env.cluster.env)


def start_foreign_job(env, gpus: int, host: str = "h1") -> int:
    """Another user's Slurm job holding ``gpus`` GPUs of ``host``, running; its id."""
    cli_env = {**os.environ, **env.cluster.env}
    foreign = subprocess.run(["sbatch", "--parsable", "-J", "someone-else", "-w", host,
                              f"--gres=gpu:{gpus}", "-o", "/dev/null", "--wrap", "sleep 300"],
                             env=cli_env, capture_output=True, text=True, check=True)
    foreign_id = int(foreign.stdout.strip())
    deadline = time.monotonic() + 30
    while slurm(env).jobs([foreign_id])[0].state != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    return foreign_id
