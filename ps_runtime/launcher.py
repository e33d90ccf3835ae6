"""Start, watch and stop the processes of one PS job.

    job = PSJob(spec, HostPlan.loopback(1, 2), LocalRunner(), out_dir, batches=20)
    with job:                       # stops every process on exit, also on exceptions
        job.start()
        print(job.endpoints())      # exact (ip, port) of servers and workers
        result = job.wait(timeout=120)

One ps-lite scheduler (on the first server host), the servers and the workers are
started through a :class:`~ps_runtime.runners.ProcessRunner` (local processes or Mininet
hosts) with the ``DMLC_*`` variables and the fixed ports of a
:class:`~ps_runtime.plan.PortPlan`. Each process logs to ``<out_dir>/<role><rank>.log``.
The first process to exit non-zero fails the job: :class:`JobFailed` names it (role,
rank, host, exit code, last log lines) and every other process is stopped (SIGTERM,
then SIGKILL after ``grace`` seconds). Live jobs are also stopped at interpreter exit,
and the children's watchdog ends them if this process is SIGKILLed.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import sys
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, IO

from sluice_common.jobspec import JobSpec
from ps_runtime.datapath import ps_env
from ps_runtime.gpu_binding import GPU_ENV, worker_env
from ps_runtime.plan import Node, HostPlan, PortPlan, endpoints, registration
from ps_runtime.runners import ProcessRunner, kill_group
from ps_runtime.watchdog import ENV as WATCHDOG_ENV

TOKEN_ENV = "SLUICE_PROGRESS_TOKEN"
COMPUTE_MODES = ("torch", "emulated")
BATCH_LINE = re.compile(r"^batch (\d+) loss (\S+) time_s (\S+)(?: comm_s (\S+))?")


@dataclass(frozen=True)
class WorkerOptions:
    """How the workers train (everything not in the JobSpec)."""
    input_size: int = 64
    num_classes: int | None = None
    lr: float = 0.01
    bucket_mb: float = 4.0
    overlap: bool = True           # push each bucket as soon as backward has produced it
    compress: str = "none"         # "fp16": gradients travel as 16-bit floats
    seed: int = 0
    device: str = "auto"
    threads: int = 0               # torch threads per worker; 0: torch's default
    report_interval: float = 0.2
    # "torch": real compute (ps_runtime.worker); "emulated": ps_runtime.emulated_worker
    # "auto": each worker decides on its own device (ps_runtime.auto_worker)
    # waits Cost_bat(b) from ``profile`` and moves the model's bytes x ``bw_scale``.
    compute: str = "torch"
    profile: str | None = None     # device profile YAML for emulated compute (None: shipped)
    bw_scale: float = 1.0          # the fabric's emulation.bw_scale (emulated compute)
    compute_s: float | None = None         # emulated: seconds per batch, overrides the profile
    bytes_per_batch: int | None = None     # emulated: wire bytes per batch, overrides the model
    pipeline_keys: int = 0         # emulated: keys in flight per batch (0: all of them at once)
    # Suspend/resume (ps_runtime.checkpoint): a job with a checkpoint_dir can be suspended
    # (request_suspend, or after batch suspend_at); resume_from continues a checkpoint.
    checkpoint_dir: str | None = None
    suspend_at: int | None = None
    resume_from: str | None = None
    # Packing (job_scheduler.core.mechanisms.Packing): two jobs share one GPU. torch on CUDA caps each
    # process's share of the GPU memory; emulated compute waits compute_slowdown x longer.
    gpu_memory_fraction: float | None = None
    compute_slowdown: float = 1.0

    def __post_init__(self):
        if self.compute not in (*COMPUTE_MODES, "auto"):
            raise ValueError(f"compute must be one of {', '.join(COMPUTE_MODES)}, auto, "
                             f"got {self.compute!r}")


@dataclass
class PSProcess:
    role: str                      # scheduler | server | worker
    rank: int
    node: Node
    port: int
    log_path: Path
    popen: object = None
    log_file: IO | None = None
    returncode: int | None = None
    exited_at: float | None = None      # time.monotonic() when poll() first saw the exit

    @property
    def name(self) -> str:
        return f"{self.role}{self.rank}"

    def describe(self) -> str:
        return f"{self.role} {self.rank} on host {self.node.host} ({self.node.ip}:{self.port})"

    def tail(self, lines: int = 8) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return []


@dataclass
class BatchRecord:
    batch: int
    loss: float
    time_s: float
    comm_s: float | None = None    # the push/pull part of time_s


@dataclass
class JobResult:
    job: str
    elapsed_s: float
    returncodes: dict[str, int]
    batches: dict[int, list[BatchRecord]] = field(default_factory=dict)  # worker -> records


class JobFailed(RuntimeError):
    def __init__(self, job: str, message: str, process: PSProcess | None = None):
        self.job = job
        self.process = process
        super().__init__(f"job '{job}' failed: {message}")


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name} (exit status {code})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


_LIVE: "weakref.WeakSet[PSJob]" = weakref.WeakSet()


@atexit.register
def _stop_live_jobs() -> None:
    for job in list(_LIVE):
        job.stop()


class PSJob:
    def __init__(self, spec: JobSpec, placement: HostPlan, runner: ProcessRunner,
                 out_dir: str | Path, *, batches: int, base_port: int | None = None,
                 options: WorkerOptions = WorkerOptions(), controller_url: str | None = None,
                 token: str | None = None, python: str = sys.executable, grace: float = 2.0,
                 controller_job: str | None = None):
        if options.compute == "torch":
            from ps_runtime.models import MODEL_NAMES   # imports torch: only when it computes

            if spec.model not in MODEL_NAMES:
                raise ValueError(f"model '{spec.model}' has no torch definition in ps_runtime "
                                 f"(trainable: {', '.join(MODEL_NAMES)})")
        if batches < 1:
            raise ValueError("batches must be at least 1")
        self.spec = spec
        self.placement = placement
        self.runner = runner
        self.out_dir = Path(out_dir)
        self.batches = batches
        self.ports = PortPlan.for_job(spec.name, placement, base_port)
        self.options = options
        self.controller_url = controller_url
        self.token = token
        # the job's identity at the controller, which its workers report progress under
        # (the scheduler service's is unique per submission); default: the job's name
        self.controller_job = controller_job or spec.name
        self.python = python
        self.grace = grace
        self.processes: list[PSProcess] = []
        self._started_at: float | None = None
        self._wall_started: float | None = None
        self._stopped = False
        self._plan_cache = None            # the emulated workers' BatchPlan

    # ---- plan ----------------------------------------------------------------------
    def endpoints(self) -> dict[str, list[tuple[str, int]]]:
        return endpoints(self.placement, self.ports)

    def registration(self) -> dict:
        """The body to register this job with the controller (ids w0.., s0..)."""
        return registration(self.controller_job, self.placement, self.ports)

    def _plan(self) -> list[PSProcess]:
        head = self.placement.servers[0]
        procs = [PSProcess("scheduler", 0, head, self.ports.scheduler,
                           self.out_dir / "scheduler0.log")]
        procs += [PSProcess("server", i, n, self.ports.server(i), self.out_dir / f"server{i}.log")
                  for i, n in enumerate(self.placement.servers)]
        procs += [PSProcess("worker", j, n, self.ports.worker(j), self.out_dir / f"worker{j}.log")
                  for j, n in enumerate(self.placement.workers)]
        return procs

    def _env(self, proc: PSProcess) -> dict[str, str]:
        threads = str(self.options.threads or 1)
        env = {
            "DMLC_ROLE": proc.role,
            "DMLC_PS_ROOT_URI": self.placement.servers[0].ip,
            "DMLC_PS_ROOT_PORT": str(self.ports.scheduler),
            "DMLC_NUM_SERVER": str(len(self.placement.servers)),
            "DMLC_NUM_WORKER": str(len(self.placement.workers)),
            "DMLC_NODE_HOST": proc.node.ip,
            "PORT": str(proc.port),                 # ps-lite's own: fixes the listening port
            "OMP_NUM_THREADS": threads,
            "MXNET_CPU_WORKER_NTHREADS": threads,
            "PYTHONUNBUFFERED": "1",
            WATCHDOG_ENV: str(os.getpid()),
            **ps_env(single_host=self.placement.single_host),
        }
        if proc.role == "worker" and self.token:
            env[TOKEN_ENV] = self.token    # not on the command line, where `ps` shows it
        if proc.role == "worker":          # its own GPU, and where it records what it ran on
            env.update(worker_env(proc.node.gpu, proc.node.host, self.ran_on_dir / f"{proc.name}.json"))
        elif self.placement.gpu_bound:
            env[GPU_ENV] = ""              # a PS process computes on the CPU: no GPU of a worker
        return env

    def _argv(self, proc: PSProcess) -> list[str]:
        if proc.role != "worker":
            return [self.python, "-m", "ps_runtime.server"]
        if self.options.compute == "emulated":
            return self._emulated_argv(proc)
        if self.options.compute == "auto":     # both command lines: the worker chooses
            return [self.python, "-m", "ps_runtime.auto_worker", "--worker-index", str(proc.rank),
                    json.dumps(self._torch_argv(proc)[3:]),
                    json.dumps(self._emulated_argv(proc)[3:])]
        return self._torch_argv(proc)

    def _torch_argv(self, proc: PSProcess) -> list[str]:
        o = self.options
        argv = [self.python, "-m", "ps_runtime.worker", "--job", self.controller_job,
                "--worker-index", str(proc.rank), "--model", self.spec.model,
                "--batch-size", str(self.spec.batch_size), "--batches", str(self.batches),
                "--input-size", str(o.input_size), "--lr", str(o.lr),
                "--bucket-mb", str(o.bucket_mb), "--seed", str(o.seed), "--device", o.device,
                "--threads", str(o.threads), "--report-interval", str(o.report_interval)]
        if not o.overlap:
            argv.append("--no-overlap")
        if o.compress != "none":
            argv += ["--compress", o.compress]
        if o.num_classes:
            argv += ["--num-classes", str(o.num_classes)]
        if o.gpu_memory_fraction is not None:
            argv += ["--gpu-memory-fraction", repr(o.gpu_memory_fraction)]
        if self.controller_url:
            argv += ["--controller", self.controller_url]
        return argv + self._checkpoint_argv()

    def _checkpoint_argv(self) -> list[str]:
        o, argv = self.options, []
        if o.checkpoint_dir:
            argv += ["--checkpoint-dir", str(o.checkpoint_dir)]
        if o.suspend_at:
            argv += ["--suspend-at", str(o.suspend_at)]
        if o.resume_from:
            argv += ["--resume", str(o.resume_from)]
        return argv

    def request_suspend(self) -> None:
        """Ask the workers to stop after the batch in progress and checkpoint."""
        from ps_runtime.checkpoint import request_suspend

        request_suspend(self.options.checkpoint_dir)

    def suspended_batch(self) -> int | None:
        """After the job ended: the batch it was suspended after, None if it finished."""
        from ps_runtime.checkpoint import read_manifest

        if not self.options.checkpoint_dir:
            return None
        try:
            m = read_manifest(self.options.checkpoint_dir)
        except ValueError:
            return None
        fresh = self._wall_started is not None and m.saved_at >= self._wall_started
        return m.batch if fresh and not m.finished else None

    def _emulated_argv(self, proc: PSProcess) -> list[str]:
        o = self.options
        if self._plan_cache is None:
            # Worked out here once, so that no worker pays for the estimator's imports.
            from ps_runtime.emulated_worker import batch_plan

            self._plan_cache = batch_plan(self.spec.model, self.spec.batch_size, o.bw_scale,
                                          o.profile, None, o.compute_s, o.bytes_per_batch)
        plan = self._plan_cache
        argv = [self.python, "-m", "ps_runtime.emulated_worker", "--job", self.controller_job,
                "--worker-index", str(proc.rank), "--model", self.spec.model,
                "--batch-size", str(self.spec.batch_size), "--batches", str(self.batches),
                "--bw-scale", repr(o.bw_scale), "--bucket-mb", str(o.bucket_mb),
                "--report-interval", str(o.report_interval)]
        argv += ["--compute-s", repr(plan.compute_s * o.compute_slowdown),
                 "--bytes-per-batch", str(plan.wire_bytes)]
        if o.pipeline_keys:
            argv += ["--pipeline-keys", str(o.pipeline_keys)]
        if self.controller_url:
            argv += ["--controller", self.controller_url]
        return argv + self._checkpoint_argv()

    @property
    def ran_on_dir(self) -> Path:
        """Where each worker records the host and GPU it ran on (``gpu_binding``)."""
        return self.out_dir / "ran_on"

    # ---- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        if self.processes:
            raise RuntimeError("job already started")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        _LIVE.add(self)
        self._started_at = time.monotonic()
        self._wall_started = time.time()
        try:
            for proc in self._plan():
                proc.log_file = open(proc.log_path, "wb")
                try:
                    proc.popen = self.runner.start(proc.node.host, self._argv(proc),
                                                   self._env(proc), proc.log_file)
                except BaseException:
                    proc.log_file.close()
                    raise
                self.processes.append(proc)
        except BaseException:
            self.stop()
            raise

    def poll(self) -> bool:
        """True when every process has exited cleanly; raises JobFailed (after stopping
        the rest) as soon as one exits non-zero."""
        for proc in self.processes:
            if proc.returncode is None:
                proc.returncode = proc.popen.poll()
                if proc.returncode is not None:
                    proc.exited_at = time.monotonic()
            if proc.returncode not in (None, 0):
                self.stop()
                tail = "\n".join(f"    {line}" for line in proc.tail())
                raise JobFailed(self.spec.name, f"{proc.describe()} "
                                f"{_exit_text(proc.returncode)}; last log lines:\n{tail}", proc)
        return all(p.returncode == 0 for p in self.processes)

    def wait(self, timeout: float | None = None, interval: float = 0.1,
             on_batch: Callable[[int, BatchRecord], None] | None = None) -> JobResult:
        """Block until the job ends. ``on_batch(worker, record)`` sees each new batch
        line of every worker as it appears."""
        deadline = None if timeout is None else time.monotonic() + timeout
        followers = {p.rank: LineFollower(p.log_path) for p in self.workers}
        try:
            while True:
                done = self.poll()
                if on_batch:
                    for rank, follower in followers.items():
                        for record in parse_batches(follower.new_lines()):
                            on_batch(rank, record)
                if done:
                    return self.result()
                if deadline is not None and time.monotonic() > deadline:
                    running = [p.describe() for p in self.processes if p.returncode is None]
                    self.stop()
                    raise JobFailed(self.spec.name, f"timed out after {timeout:.0f} s; still "
                                    f"running: {', '.join(running)}")
                time.sleep(interval)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process still running: SIGTERM to its group, SIGKILL after grace."""
        if self._stopped or not self.processes:
            self._close_logs()
            return
        for proc in self.processes:
            if proc.popen.poll() is None:
                kill_group(proc.popen, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and any(p.popen.poll() is None for p in self.processes):
            time.sleep(0.05)
        for proc in self.processes:
            kill_group(proc.popen, signal.SIGKILL)   # also strays left in the group
            proc.popen.wait()
            if proc.returncode is None:
                proc.returncode = proc.popen.returncode
        self._stopped = True
        self._close_logs()
        _LIVE.discard(self)

    def _close_logs(self) -> None:
        for proc in self.processes:
            if proc.log_file and not proc.log_file.closed:
                proc.log_file.close()

    def __enter__(self) -> "PSJob":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- results -------------------------------------------------------------------
    @property
    def workers(self) -> list[PSProcess]:
        return [p for p in self.processes if p.role == "worker"]

    def result(self) -> JobResult:
        self.stop()    # everything has exited; closes logs
        elapsed = time.monotonic() - (self._started_at or time.monotonic())
        return JobResult(
            job=self.spec.name, elapsed_s=elapsed,
            returncodes={f"{p.role}{p.rank}": p.returncode for p in self.processes},
            batches={p.rank: list(parse_batches(p.tail(10 ** 9))) for p in self.workers})


def parse_batches(lines: list[str]):
    for line in lines:
        m = BATCH_LINE.match(line)
        if m:
            yield BatchRecord(int(m.group(1)), float(m.group(2)), float(m.group(3)),
                              float(m.group(4)) if m.group(4) else None)


class LineFollower:
    """New complete lines of a growing log file."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = b""

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return []
        self.offset += len(chunk)
        data = self.partial + chunk
        lines = data.split(b"\n")
        self.partial = lines.pop()
        return [line.decode(errors="replace") for line in lines]
