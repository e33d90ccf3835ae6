"""A PS job inside a Slurm allocation: the batch script's side of ``--executor slurm``.

The scheduler's ``SlurmExecutor`` submits ONE heterogeneous Slurm job per sluice job, one
component per host of the decision (the component of the first PS host first: the batch
script runs there, as the ps-lite scheduler does). The batch script runs

    python -m ps_runtime.slurm_job RUN_DIR/plan.json

which starts the job's processes with the very launcher ``sluice train``/``sluice run``
use (:class:`ps_runtime.launcher.PSJob`: DMLC_* roles, fixed ports of
:class:`~ps_runtime.plan.PortPlan`, fail-fast watching, logs under ``RUN_DIR/ps``), only
through :class:`SrunRunner`: every PS and worker process is one ``srun --het-group=G``
step in the component of its host: a worker ``--exact --gres=gpu:1`` (its own GPU,
bound by Slurm), a PS process ``--overlap --gres=none``. Each process first records
where it really runs (``RUN_DIR/ran_on/<role><rank>.json``: hostname, the IP it reaches
the ps-lite scheduler from, Slurm's node name, the GPU Slurm gave it; a worker adds the
device it computed on) and then execs the PS program.

Facts of Slurm 22.05 handled here:
- ``srun`` exits 0 when its node fails: a job counts as finished only when every
  worker's log shows its last batch; the executor also checks the Slurm job's state.
- a ``kill -9`` of slurmctld just after a job started can start its batch script twice
  ("Duplicate jobid"): the second start finds ``RUN_DIR/batch.started`` (O_EXCL) and
  waits for the first one's exit status instead of starting any process again.

Suspend: the job checkpoints into ``RUN_DIR/ps/checkpoint`` and stops after
the batch in progress when the scheduler writes the request file there, or when Slurm
sends SIGUSR1 to this batch script (``sbatch --signal=B:USR1@N``: before a preemption
or the time limit); it then writes ``RUN_DIR/suspended.json`` (the checkpoint, the
batch it stopped after) and exit status 0, and the scheduler re-queues it to resume
(``plan["resume_from"]``: a new Slurm job continuing that checkpoint).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from ps_runtime.gpu_binding import GPU_ENV, RAN_ON_ENV, visible_gpu
from ps_runtime.runners import _environment, REPO_ROOT
from ps_runtime.slurm_plan import (CHECKPOINT_DIR, EXIT_FILE, ERROR_FILE, PS_LOG_DIR,
                                  RAN_ON_DIR, RESULT_FILE, STARTED_FILE, SUSPENDED_FILE,
                                  SlurmPlan)
from ps_runtime.watchdog import ENV as WATCHDOG_ENV


class SrunRunner:
    """Start a PS process as an ``srun`` step in the heterogeneous-job component of its
    host (``groups``: host -> component index; one component: no ``--het-group``)."""

    def __init__(self, groups: dict[str, int], ran_on_dir: Path, python: str = sys.executable):
        self.groups = dict(groups)
        self.ran_on_dir = Path(ran_on_dir)
        self.python = python
        self.het = len(set(self.groups.values())) > 1

    def argv(self, host: str, argv: list[str], name: str) -> list[str]:
        if host not in self.groups:
            raise ValueError(f"host {host!r} has no component in this Slurm job "
                             f"(components: {', '.join(sorted(self.groups))})")
        srun = ["srun", "--ntasks=1", "--nodes=1", "--quiet", "--kill-on-bad-exit=0"]
        if name.startswith("worker"):
            # its own GPU, bound by Slurm (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS), and its
            # own CPU (--exact: a step takes only what it asks, not the whole allocation)
            srun += ["--exact", "--gres=gpu:1"]
        else:              # a PS process shares the allocation and sees no GPU
            srun += ["--overlap", "--gres=none"]
        if self.het:
            srun.append(f"--het-group={self.groups[host]}")
        record = str(self.ran_on_dir / f"{name}.json")
        return [*srun, self.python, "-m", "ps_runtime.slurm_job", "--record", record,
                "--host", host, "--", *argv]

    def start(self, host: str, argv: list[str], env: dict[str, str], log: IO,
              stdin=subprocess.DEVNULL) -> subprocess.Popen:
        name = _process_name(argv, env)
        if RAN_ON_ENV in env:       # a worker adds its GPU to the step's own record
            env = {**env, RAN_ON_ENV: str(self.ran_on_dir / f"{name}.json")}
        return subprocess.Popen(self.argv(host, argv, name), env=_environment(env), stdout=log,
                                stderr=subprocess.STDOUT, stdin=stdin, cwd=REPO_ROOT,
                                start_new_session=True)


def _process_name(argv: list[str], env: dict[str, str]) -> str:
    role = env.get("DMLC_ROLE", "proc")
    if role == "worker" and "--worker-index" in argv:
        return f"worker{argv[argv.index('--worker-index') + 1]}"
    port = env.get("PORT", "")
    return f"{role}-{port}"


def local_ip(towards: str) -> str:
    """The address this host reaches ``towards`` from (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((towards, 9))
            return s.getsockname()[0]
        except OSError:
            return ""


def record_and_exec(record: str, host: str, argv: list[str]) -> None:
    """In the srun task: write where this process runs, then become the PS program."""
    env = dict(os.environ)
    # srun ends its tasks when the batch script's launcher goes away; the launcher's pid
    # means nothing on another node, so the watchdog must not look for it there.
    env.pop(WATCHDOG_ENV, None)
    facts = {"intended_host": host, "hostname": socket.gethostname(),
             "slurm_node": env.get("SLURMD_NODENAME", ""),
             "ip": local_ip(env.get("DMLC_PS_ROOT_URI", "127.0.0.1")),
             "intended_ip": env.get("DMLC_NODE_HOST", ""), "role": env.get("DMLC_ROLE", ""),
             "slurm_job_id": env.get("SLURM_JOB_ID", ""), "pid": os.getpid(),
             "at": time.time(),
             # the GPU binding Slurm gave the step (GRES), as the process sees it
             "gpu": visible_gpu(env), GPU_ENV: env.get(GPU_ENV),
             "slurm_step_gpus": env.get("SLURM_STEP_GPUS")}
    path = Path(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(facts))
    os.replace(tmp, path)
    os.execvpe(argv[0], argv, env)


def _write_exit(run_dir: Path, code: int, message: str = "") -> None:
    tmp = run_dir / (EXIT_FILE + ".tmp")
    tmp.write_text(f"{code}\n")
    os.replace(tmp, run_dir / EXIT_FILE)
    if message:
        (run_dir / ERROR_FILE).write_text(message + "\n")


def _wait_for_first(run_dir: Path) -> int:
    print("slurm_job: this job's batch script already started once (Slurm started it "
          "again, e.g. after a slurmctld restart: 'Duplicate jobid'); waiting for the first "
          "start's result instead of starting the job twice", file=sys.stderr, flush=True)
    while True:
        try:
            return int((run_dir / EXIT_FILE).read_text().strip())
        except (OSError, ValueError):
            time.sleep(0.5)


def run_plan(plan_path: Path) -> int:
    from sluice_common.jobspec import parse_jobs_text
    from ps_runtime.launcher import JobFailed, PSJob, WorkerOptions
    from ps_runtime.plan import HostPlan, Node
    from ps_runtime.compute import resolve_compute

    plan = SlurmPlan.read(plan_path)
    run_dir = Path(plan.run_dir)
    try:
        fd = os.open(run_dir / STARTED_FILE, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return _wait_for_first(run_dir)
    os.write(fd, json.dumps({"slurm_job_id": os.environ.get("SLURM_JOB_ID"),
                             "host": socket.gethostname(), "at": time.time()}).encode())
    os.close(fd)
    (spec,) = [s for s in parse_jobs_text(plan.job_yaml, str(plan_path)) if s.name == plan.job]
    hosts = HostPlan(tuple(Node(h, ip) for h, ip in plan.servers),
                     tuple(Node(h, ip) for h, ip in plan.workers))
    # auto: each worker decides on its own device (ps_runtime.auto_worker), not this host
    compute = plan.compute or "auto"
    compute = compute if compute == "auto" else resolve_compute(compute)
    options = WorkerOptions(compute=compute, bw_scale=float(plan.bw_scale or 1.0),
                            compute_s=plan.compute_s, bytes_per_batch=plan.bytes_per_batch,
                            profile=plan.profile, threads=1,
                            checkpoint_dir=str(run_dir / CHECKPOINT_DIR),
                            resume_from=plan.resume_from)
    batches = int(plan.batches)
    runner = SrunRunner(plan.groups, run_dir / RAN_ON_DIR)
    job = PSJob(spec, hosts, runner, run_dir / PS_LOG_DIR, batches=batches, options=options,
                base_port=plan.base_port,     # reserved per host by the scheduler
                controller_url=os.environ.get("SLUICE_CONTROLLER_URL") or None,
                token=os.environ.get("SLUICE_CONTROLLER_JOB_TOKEN") or None,
                controller_job=os.environ.get("SLUICE_CONTROLLER_JOB_ID") or None)
    old = signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))
    from ps_runtime.train_checkpoint import suspend_on_usr1
    suspend_on_usr1(job)          # Slurm's --signal=B:USR1@N: a checkpointed stop
    try:
        with job:
            job.start()
            result = job.wait(timeout=float(plan.timeout or 3600))
    except JobFailed as err:
        print(f"slurm_job: {err}", file=sys.stderr, flush=True)
        _write_exit(run_dir, 1, str(err).splitlines()[0])
        return 1
    except SystemExit as err:        # SIGTERM: scancel or a Slurm time limit
        _write_exit(run_dir, int(err.code or 143), "stopped by SIGTERM (scancel)")
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
    stopped = job.suspended_batch()
    if stopped is not None:
        (run_dir / SUSPENDED_FILE).write_text(json.dumps(
            {"checkpoint": job.options.checkpoint_dir, "batch": stopped, "batches": batches}))
        _write_exit(run_dir, 0)
        print(f"slurm_job: job {spec.name} suspended after batch {stopped}", flush=True)
        return 0
    # (a resumed job's workers start after its checkpoint's batch: judge the last one)
    short = {w: (r[-1].batch if r else 0) for w, r in result.batches.items()
             if not r or r[-1].batch < batches}
    missing = [p.name for p in job.workers if p.rank not in result.batches]
    if short or missing:
        # srun exits 0 when its node fails: a worker that "ended well" without its last
        # batch did not finish.
        text = (f"worker(s) ended without their last batch ({batches}): "
                + ", ".join([f"worker{w} at {n}" for w, n in short.items()] + missing))
        print(f"slurm_job: {text}", file=sys.stderr, flush=True)
        _write_exit(run_dir, 1, text)
        return 1
    (run_dir / RESULT_FILE).write_text(json.dumps(
        {"elapsed_s": result.elapsed_s, "returncodes": result.returncodes,
         "batches": {str(w): len(r) for w, r in result.batches.items()}}))
    _write_exit(run_dir, 0)
    print(f"slurm_job: job {spec.name} done in {result.elapsed_s:.1f} s", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # In an srun task: --record FILE --host HOST -- PROGRAM... (record, then exec).
    if argv[:1] == ["--record"] and len(argv) >= 5 and argv[2] == "--host" and argv[4] == "--":
        record_and_exec(argv[1], argv[3], argv[5:])
        return 127          # not reached
    parser = argparse.ArgumentParser(prog="python -m ps_runtime.slurm_job")
    parser.add_argument("plan", help="plan.json written by the Slurm executor")
    return run_plan(Path(parser.parse_args(argv).plan))


if __name__ == "__main__":
    sys.exit(main())
