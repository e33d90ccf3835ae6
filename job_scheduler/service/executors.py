"""Executors: how the scheduler service runs a job, and how it finds out what became of it.

Both executors are restart-safe: everything ``poll`` needs is in the job's store record
(wall-clock start/end times, pid + process start time, a run directory with an
exit-status file), never in this process's memory. So a service restarted after
``kill -9`` polls its predecessor's jobs exactly as it polls its own.

Starting is two-phase so that a crash cannot make a job run twice or be forgotten:
``plan`` returns the fields recorded (state 'running') BEFORE anything is launched, and
``launch`` then starts it and returns the fields recorded after (the pid).

- ``SimulatedExecutor``: the job "runs" for its estimated C(n) seconds times a time
  factor; it finishes at ``expected_end``, whoever is watching then.
- ``LocalExecutor``: a real process group (``start_new_session``) under ``/bin/sh`` that
  writes ``exit_status`` into the run directory when the job's command ends; it outlives
  the service. A job whose process group is gone without an exit status was killed.
  The command is ``sluice train`` (the PS runtime) unless ``--local-command`` says
  otherwise; the launcher exits non-zero when any of its processes (a worker) dies.
  Each job gets a PS port block no other running local job holds (``--base-port``, env
  ``SLUICE_BASE_PORT``, recorded in the run directory for a restarted service).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from sluice_common.jobspec import JobSpec
from job_scheduler.core.estimator import effective_bandwidth, exchange_path
from job_scheduler.core.decisions import StartDecision
from job_scheduler.service.store import JobRecord


@dataclass(frozen=True)
class Outcome:
    state: str                 # 'finished', 'failed' or 'suspended'
    finished_at: float
    exit_code: int | None = None
    reason: str | None = None
    # The job's process never started (the service died between recording the start
    # and launching): the service re-queues it without counting an attempt.
    never_started: bool = False
    # state 'suspended' (its resource manager preempted it; a checkpoint was written):
    # {checkpoint, work_left, suspend_s}; the service re-queues it to resume
    resume: dict | None = None


# ---- simulated -------------------------------------------------------------------------

DurationFn = Callable[[JobSpec, StartDecision], float]


def estimated_duration(topology, estimator) -> DurationFn:
    """C(n) of the job at the effective bandwidth of its actual placement (and, under an
    exchange pricing, the exchange's fixed time over its path: the simulator's price)."""

    def duration(spec: JobSpec, decision: StartDecision) -> float:
        ps, workers = decision.ps_hosts, decision.worker_hosts
        bw = effective_bandwidth(topology, ps, workers, bus=estimator.bus_mbps)
        path = exchange_path(topology, ps, workers) if estimator.exchange else None
        return estimator.C(spec, decision.gpus, bw, path)

    return duration


class SimulatedExecutor:
    kind = "simulated"

    def __init__(self, duration_fn: DurationFn, time_factor: float = 1.0):
        self.duration_fn = duration_fn
        self.time_factor = time_factor
        from job_scheduler.service.slurm_ports import PortBook
        # Nothing listens on a simulated job's ports, but the controller is told of
        # them: two simulated jobs sharing hosts must not share flows there either.
        self.ports = PortBook()

    def port_block(self, job: JobRecord) -> int:
        placement = job.placement or {}
        return self.ports.reserve(job.id, job.name, {*placement.get("ps_hosts", ()),
                                                     *placement.get("worker_hosts", ())})

    def held_port_block(self, job: JobRecord) -> int | None:
        return self.ports.block_of(job.id)

    def plan(self, job: JobRecord, decision: StartDecision, now: float) -> dict:
        """A resumed job first restores (``restore_s``, no progress), then does the
        work it has left at the rate of the whole job on this decision: the
        simulator's arithmetic, so that the service's decisions equal the simulator's."""
        seconds = max(0.0, float(self.duration_fn(job.spec, decision))) * self.time_factor
        resume = job.resume or {}
        left, trains_from = resume.get("work_left", 1.0), now + resume.get("restore_s", 0.0)
        rate = 1.0 / seconds if seconds > 0 else float("inf")
        return {"executor": self.kind, "started_at": now,
                "expected_end": trains_from + (left / rate if left else 0.0),
                "resume": {**resume, "work_left": left, "trains_from": trains_from,
                           "run_s": seconds}}

    def suspend(self, job: JobRecord, now: float) -> dict:
        """The work it has left now (progress kept); nothing to checkpoint."""
        resume = job.resume or {}
        run_s = resume.get("run_s")
        if not run_s:
            return {"work_left": 0.0 if run_s == 0 else 1.0, "suspend_s": 0.0}
        done = max(now - resume["trains_from"], 0.0) * (1.0 / run_s)   # as the simulator
        self.ports.release(job.id)
        return {"work_left": max(resume["work_left"] - done, 0.0), "suspend_s": 0.0}

    def launch(self, job: JobRecord, env: Mapping[str, str] | None = None) -> dict:
        return {}

    def poll(self, job: JobRecord, now: float) -> Outcome | None:
        if job.expected_end is None:
            self.ports.release(job.id)
            return Outcome("failed", now, None, "simulated job has no recorded end time")
        if now >= job.expected_end:
            self.ports.release(job.id)
            return Outcome("finished", job.expected_end, 0, None)
        return None

    def learned(self, job: JobRecord) -> dict:
        return {}        # everything poll needs is recorded at launch

    def stop(self, job: JobRecord) -> None:
        self.ports.release(job.id)


# ---- local processes -------------------------------------------------------------------

def process_start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks), or None when the pid
    does not exist or is a zombie. Together with the pid it names one process for good:
    a reused pid has a different start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()   # after "pid (comm) "
    if fields[0] == "Z":
        return None
    return fields[19]


CommandFn = Callable[[JobRecord, StartDecision, Path], str]
# The scheduler's and the controller's admin tokens: removed from every job's environment
# (a job gets only its own progress token, SLUICE_CONTROLLER_JOB_TOKEN).
ADMIN_TOKEN_ENVS = ("SLUICE_SCHEDULER_TOKEN", "SLUICE_CONTROLLER_TOKEN", "SLUICE_ADMIN_TOKEN")


def template_command(template: str) -> CommandFn:
    """A shell command from ``--local-command``: {job_id} {name} {gpus} {workers} {ps_hosts}
    {model} {batch_size} {epochs} {dataset_size} {run_dir} {checkpoint_dir} {resume_from}
    are substituted, quoted (a command a preemptive policy may suspend checkpoints into
    {checkpoint_dir} when the file SUSPEND appears there, and continues {resume_from},
    empty for a first start)."""

    def build(job: JobRecord, decision: StartDecision, run_dir: Path) -> str:
        values = {
            "job_id": job.id, "name": job.name, "gpus": decision.gpus,
            "workers": ",".join(decision.worker_hosts), "ps_hosts": ",".join(decision.ps_hosts),
            "model": job.spec.model, "batch_size": job.spec.batch_size,
            "epochs": job.spec.epochs, "dataset_size": job.spec.dataset_size, "run_dir": run_dir,
            "checkpoint_dir": checkpoint_dir(run_dir),
            "resume_from": (job.resume or {}).get("checkpoint") or "",
        }
        return template.format(**{k: shlex.quote(str(v)) for k, v in values.items()})

    return build


def train_command(job: JobRecord, decision: StartDecision, run_dir: Path) -> str:
    """The default local job: ``sluice train`` (``ps_runtime``: MXNet ps-lite processes on
    this machine, one worker per granted GPU). The controller URL and the per-job
    progress token come from the environment the service gives the job, so the token
    is never written to the run directory."""
    from sluice_common.jobspec import job_to_dict
    import yaml

    (run_dir / "job.yaml").write_text(yaml.safe_dump({"jobs": [job_to_dict(job.spec)]}))
    argv = [sys.executable, "-m", "sluice", "train", str(run_dir / "job.yaml"),
            "--job", job.name, "--workers", str(decision.gpus),
            "--servers", str(len(decision.ps_hosts)), "--out", str(run_dir / "ps"), "--quiet",
            "--suspendable"]       # a preemptive policy may suspend it (checkpoint_dir)
    if (job.resume or {}).get("checkpoint"):      # continue where its suspension stopped
        argv += ["--resume", job.resume["checkpoint"]]
    if decision.gpu_ids is not None:    # each worker on its own GPU of the decision
        argv += ["--worker-gpus",
                 ",".join(map(str, decision.gpu_ids.per_worker(decision.worker_hosts)))]
    return (" ".join(shlex.quote(a) for a in argv)
            # --opt=value: a token may start with '-' (token_urlsafe)
            + ' ${SLUICE_CONTROLLER_URL:+"--controller=$SLUICE_CONTROLLER_URL"}'
            + ' ${SLUICE_CONTROLLER_JOB_TOKEN:+"--token=$SLUICE_CONTROLLER_JOB_TOKEN"}'
            + ' ${SLUICE_BASE_PORT:+"--base-port=$SLUICE_BASE_PORT"}')


def checkpoint_dir(run_dir: Path) -> Path:
    """Where a local job checkpoints when it is suspended (``sluice train --suspendable
    --out RUN_DIR/ps``)."""
    return Path(run_dir) / "ps" / "checkpoint"


class LocalExecutor:
    kind = "local"
    EXIT_FILE = "exit_status"
    PID_FILE = "pid"
    STOP_GRACE_S = 3.0         # SIGTERM, then SIGKILL after this long
    PORT_FILE = "base_port"    # the job's PS port block (env SLUICE_BASE_PORT)
    HOST = "local"             # every local job runs on this machine

    def __init__(self, run_root: str | Path, command_fn: CommandFn | None = None):
        self.run_root = Path(run_root)
        self.command_fn = command_fn or train_command
        self._children: dict[int, subprocess.Popen] = {}   # ours: reap them (no zombies)
        self._pending: dict[int, StartDecision] = {}
        from job_scheduler.service.slurm_ports import PortBook
        self.ports = PortBook()    # a PS port block per running job, none shared

    def plan(self, job: JobRecord, decision: StartDecision, now: float) -> dict:
        suspends = (job.resume or {}).get("suspends", 0)   # a resume: a directory of its own
        run_dir = self.run_root / (f"job-{job.id}-attempt-{job.attempts + 1}"
                                   + (f"-resume-{suspends}" if suspends else ""))
        self._pending[job.id] = decision
        return {"executor": self.kind, "started_at": now, "run_dir": str(run_dir)}

    def port_block(self, job: JobRecord) -> int:
        """The PS port block the job's launch will use (reserved now; the launch, right
        after, reserves the same), for the controller's registration."""
        return self.ports.reserve(job.id, job.name, {self.HOST})

    def held_port_block(self, job: JobRecord) -> int | None:
        """The block a running job holds."""
        return self.ports.block_of(job.id)

    def launch(self, job: JobRecord, extra_env: Mapping[str, str] | None = None) -> dict:
        decision = self._pending.pop(job.id)
        run_dir = Path(job.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        base = self.ports.reserve(job.id, job.name, {self.HOST})
        (run_dir / self.PORT_FILE).write_text(f"{base}\n")
        command = self.command_fn(job, decision, run_dir)
        (run_dir / "command").write_text(command + "\n")
        # The wrapper records its own pid first (so a service that dies right after
        # Popen still finds the job) and the command's exit status last, atomically.
        wrapper = (f"echo $$ > {self.PID_FILE}\n( {command}\n)\n"
                   f"echo $? > {self.EXIT_FILE}.tmp && mv {self.EXIT_FILE}.tmp {self.EXIT_FILE}\n")
        env = dict(os.environ,
                   SLUICE_JOB_ID=str(job.id), SLUICE_JOB_NAME=job.name,
                   SLUICE_GPUS=str(decision.gpus),
                   SLUICE_WORKER_HOSTS=",".join(decision.worker_hosts),
                   SLUICE_PS_HOSTS=",".join(decision.ps_hosts),
                   SLUICE_GPU_IDS=json.dumps(decision.gpu_ids.as_dict()
                                             if decision.gpu_ids is not None else {}),
                   SLUICE_RUN_DIR=str(run_dir), SLUICE_PYTHON=sys.executable,
                   SLUICE_BASE_PORT=str(base), **(extra_env or {}))
        for admin_token in ADMIN_TOKEN_ENVS:       # jobs never see an admin token
            env.pop(admin_token, None)
        with open(run_dir / "output.log", "ab") as log:
            proc = subprocess.Popen(["/bin/sh", "-c", wrapper], cwd=run_dir, env=env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
        self._children[job.id] = proc
        out = {"pid": proc.pid, "pid_start": process_start_time(proc.pid)}
        if job.resume:             # the restart's cost counts from here (``learned``)
            out["resume"] = {**job.resume, "launched_at": time.time()}
        return out

    def _pid_of(self, job: JobRecord) -> tuple[int | None, str | None]:
        if job.pid is not None:
            return job.pid, job.pid_start
        try:   # the service died between Popen and recording the pid
            pid = int((Path(job.run_dir) / self.PID_FILE).read_text())
        except (OSError, ValueError, TypeError):
            return None, None
        return pid, None

    def _alive(self, pid: int | None, start: str | None) -> bool:
        if pid is None:
            return False
        now_start = process_start_time(pid)
        return now_start is not None and (start is None or now_start == start)

    def poll(self, job: JobRecord, now: float) -> Outcome | None:
        """The job's outcome once it ended (its port block then freed)."""
        if not self.ports.holds(job.id):       # started by a previous run of the service
            with suppress(OSError, ValueError, TypeError):
                base = int((Path(job.run_dir) / self.PORT_FILE).read_text())
                self.ports.hold(job.id, base, {self.HOST})
        outcome = self._poll(job, now)
        if outcome is not None:
            self.ports.release(job.id)
        return outcome

    def _poll(self, job: JobRecord, now: float) -> Outcome | None:
        child = self._children.get(job.id)
        if child is not None and child.poll() is not None:
            self._children.pop(job.id, None)
        status_file = Path(job.run_dir or "/nonexistent") / self.EXIT_FILE
        pid, start = self._pid_of(job)
        if status_file.exists():
            try:
                code = int(status_file.read_text().strip())
            except ValueError:      # unreadable: the job did not end cleanly
                code = -1
            finished_at = status_file.stat().st_mtime
            self._kill_group(pid, start, signal.SIGKILL)   # leftovers of the job, if any
            stopped = suspended_at(job) if code == 0 else None
            if stopped is not None:   # asked from outside (SIGUSR1): it resumes later
                return Outcome("suspended", finished_at, 0, "suspended by a signal",
                               resume=stopped)
            if code == 0:
                return Outcome("finished", finished_at, 0, None)
            return Outcome("failed", finished_at, code, _exit_reason(code))
        if self._alive(pid, start):
            return None
        if pid is None:
            if job.started_at is not None and now - job.started_at < 5.0:
                return None    # just launched, the wrapper has not written its pid yet
            return Outcome("failed", now, None, "never launched (service stopped while "
                           "starting it)", never_started=True)
        return Outcome("failed", now, None,
                       "job process vanished without an exit status (killed, or host reboot)")

    def learned(self, job: JobRecord) -> dict:
        """A resumed job's restart cost, once every worker has logged a batch."""
        return restart_learned(job)

    def progress(self, job: JobRecord) -> float | None:
        """The fraction of its batches the job has done (its workers' logs)."""
        from job_scheduler.service.suspending import logged_fraction

        if not job.run_dir:
            return None
        try:     # sluice train says how many batches each worker does
            said = (Path(job.run_dir) / "output.log").read_text(errors="replace")
        except OSError:
            return None
        total = re.search(r"(\d+) batches per worker", said)
        return logged_fraction(Path(job.run_dir) / "ps", total and int(total.group(1)), job.gpus)

    SUSPEND_TIMEOUT_S = 300.0  # the batch in progress + writing the checkpoint

    def suspend(self, job: JobRecord, now: float) -> dict:
        """Ask the job to stop after the batch in progress with a checkpoint (the
        request file of ``sluice train --suspendable``), wait until its process has
        exited, free its port block. RuntimeError when it does not stop in time or
        stops without a checkpoint (the caller stops it)."""
        from ps_runtime.checkpoint import request_suspend

        started = time.monotonic()
        request_suspend(checkpoint_dir(Path(job.run_dir)))
        status_file = Path(job.run_dir) / self.EXIT_FILE
        pid, start = self._pid_of(job)
        while not status_file.exists():
            if time.monotonic() - started > self.SUSPEND_TIMEOUT_S:
                raise RuntimeError(f"no checkpoint within {self.SUSPEND_TIMEOUT_S:g} s")
            if not self._alive(pid, start):
                raise RuntimeError("its process vanished while suspending")
            if (child := self._children.get(job.id)) is not None:
                child.poll()
            time.sleep(0.05)
        outcome = self.poll(job, now)          # reaps the process, frees the ports
        if outcome is not None and outcome.state == "suspended":
            return {**outcome.resume, "suspend_s": round(time.monotonic() - started, 3)}
        if outcome is not None and outcome.state == "finished":
            return {"finished": True}
        raise RuntimeError(f"it ended without a checkpoint: {outcome and outcome.reason}")

    def stop(self, job: JobRecord) -> None:
        pid, start = self._pid_of(job)
        if not self._alive(pid, start):
            return
        self._kill_group(pid, start, signal.SIGTERM)
        deadline = time.monotonic() + self.STOP_GRACE_S
        while time.monotonic() < deadline and self._alive(pid, start):
            child = self._children.get(job.id)
            if child is not None:
                child.poll()
            time.sleep(0.05)
        self._kill_group(pid, start, signal.SIGKILL)
        child = self._children.pop(job.id, None)
        if child is not None:
            child.wait(timeout=5)

    def _kill_group(self, pid: int | None, start: str | None, sig: int) -> None:
        # Only signal a group whose leader is still the process we started.
        if pid is None or (start is not None and process_start_time(pid) not in (None, start)):
            return
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)


def _exit_reason(code: int) -> str:
    if code > 128:
        with suppress(ValueError):      # not a signal's number
            return f"job process killed by {signal.Signals(code - 128).name} (exit {code})"
    return f"job process exited with status {code}"


def suspended_at(job: JobRecord) -> dict | None:
    """The checkpoint a local job that exited 0 left when it was suspended:
    {checkpoint, work_left, batch, batches}; None when it finished its last batch."""
    from ps_runtime.checkpoint import read_manifest

    directory = checkpoint_dir(Path(job.run_dir or "/nonexistent"))
    try:
        m = read_manifest(directory)
    except ValueError:            # no checkpoint: it ran to its end
        return None
    if m.finished:
        return None
    return {"checkpoint": str(directory), "work_left": round(1 - m.batch / m.batches, 6),
            "batch": m.batch, "batches": m.batches}


def restart_learned(job: JobRecord) -> dict:
    """``resume.restart_s`` of a resumed job once every worker log of its run has a
    batch line: from its launch to the poll that saw it (the resolution of one slot)."""
    resume = job.resume or {}
    if "launched_at" not in resume or "restart_s" in resume or not job.run_dir:
        return {}
    from ps_runtime.launcher import parse_batches

    logs = sorted((Path(job.run_dir) / "ps").glob("worker*.log"))
    if not logs or job.gpus is None or len(logs) < job.gpus:
        return {}
    for log in logs:
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            return {}
        if next(parse_batches(lines), None) is None:
            return {}
    return {"resume": {**resume, "restart_s": round(time.time() - resume["launched_at"], 3)}}
