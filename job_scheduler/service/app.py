"""Wiring of the scheduler service process: store + executors + policy + HTTP server.

``serve`` reconciles what a previous run left behind, then runs the scheduling loop in a
thread and the HTTP server in the main thread until SIGTERM/SIGINT. Stopping the
service stops nothing else: simulated jobs keep their recorded end times and local jobs
keep running in their own sessions; the next start reconciles them.
"""

from __future__ import annotations

import fcntl
import logging
import signal
import sys
import threading
from pathlib import Path

from job_scheduler.core.estimator import Estimator, effective_bandwidth
from job_scheduler.service.executors import LocalExecutor, SimulatedExecutor, template_command
from sluice_common.jobspec import JobSpec
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.api import SchedulerHTTPServer
from job_scheduler.core.decisions import StartDecision
from job_scheduler.service.policy_step import PolicyStep
from job_scheduler.service.store import JobStore
from sluice_common.errors import InputError
from topologies import Topology

log = logging.getLogger("sluice.scheduler")


def estimated_duration(topology: Topology, estimator: Estimator):
    """C(n) of the job at the effective bandwidth of its actual placement."""

    def duration(spec: JobSpec, decision: StartDecision) -> float:
        bw = effective_bandwidth(topology, decision.ps_hosts, decision.worker_hosts)
        return estimator.C(spec, decision.gpus, bw)

    return duration


def _lock_store(db_path: Path):
    """One scheduler per job store: two would both start the same queued jobs. The
    kernel drops the flock when the holder dies, kill -9 included."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    lock = open(db_path.with_name(db_path.name + ".lock"), "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise InputError(str(db_path), "another scheduler service is using this job store")
    return lock


def build_service(*, topology: Topology, policy: PolicyStep, estimator: Estimator,
                  db_path: Path, executor: str, time_factor: float = 1.0,
                  local_command: str | None = None, max_retries: int = 0,
                  controller_url: str | None = None, token: str | None = None,
                  listen: tuple[str, int] = ("127.0.0.1", 8181),
                  max_body: int = 1 << 20, tls: tuple[str, str] | None = None,
                  slurm_options=None, slurm_env: dict[str, str] | None = None
                  ) -> tuple[SchedulerService, SchedulerHTTPServer]:
    slurm = _slurm_executor(topology, db_path, slurm_options, slurm_env,
                            check=executor == "slurm")
    controller = None
    if controller_url:
        from job_scheduler.service.controller_link import ControllerNotifier
        controller = ControllerNotifier(controller_url, topology)
    try:   # bind first: a busy port must not leave anything behind
        server = SchedulerHTTPServer(listen, None, token=token, max_body=max_body, tls=tls)
    except OSError as err:
        raise InputError("--listen", f"cannot listen on {listen[0]}:{listen[1]}: "
                         f"{err.strerror or err}")
    try:
        lock = _lock_store(Path(db_path))
        store = JobStore(db_path)
    except InputError:
        server.server_close()
        raise
    except Exception as err:   # sqlite3.Error, OSError: unusable path or not a database
        server.server_close()
        raise InputError(str(db_path), f"cannot open the job store: {err}")
    store.lock_file = lock     # held (flock) for the life of the process
    executors = {
        "simulated": SimulatedExecutor(estimated_duration(topology, estimator), time_factor),
        # Always present, so jobs started by a previous run's local executor are
        # reconciled even when this run simulates.
        "local": LocalExecutor(Path(db_path).parent / (Path(db_path).name + ".runs"),
                               template_command(local_command) if local_command else None),
        # (no --local-command: `sluice train`, the PS runtime)
        # Always present too: a previous run's Slurm jobs are reconciled by Slurm job id.
        "slurm": slurm,
    }
    if controller is not None:
        log.info("controller %s: jobs are registered on start, removed when they end",
                 controller.client.url)
    service = SchedulerService(store, topology, policy, executors, executor,
                               max_retries=max_retries, controller=controller,
                               capacity=slurm.capacity if executor == "slurm" else None)
    try:
        service.check_running_fit()
    except InputError:
        server.server_close()
        store.close()
        raise
    server.service = service
    return service, server


def _slurm_executor(topology: Topology, db_path: Path, options, env, check: bool):
    """The Slurm executor; with ``check`` (``--executor slurm``) Slurm must answer and
    know every host of the topology at its address, else exit 2 naming the command that
    failed or the hosts."""
    from job_scheduler.service.slurm_executor import SlurmExecutor, SlurmJobOptions, store_tag
    from slurm_client import SlurmClient, SlurmError

    executor = SlurmExecutor(SlurmClient(env), topology,
                             Path(db_path).parent / (Path(db_path).name + ".slurm-runs"),
                             options or SlurmJobOptions(), tag=store_tag(db_path))
    if check:
        try:
            nodes = executor.check()
        except SlurmError as err:
            raise InputError("--executor slurm", f"Slurm is not usable: {err}")
        log.info("Slurm: %d node(s), %d GPU(s) configured, %d allocated", len(nodes),
                 sum(n.gpus for n in nodes), sum(n.gpus_used for n in nodes))
    return executor


def serve(service: SchedulerService, server: SchedulerHTTPServer, slot: float,
          token_set: bool) -> int:
    stop = threading.Event()

    def on_signal(signum, frame):
        log.info("signal %s: stopping (jobs keep running; a restart reconciles them)",
                 signal.Signals(signum).name)
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    service.recover()
    loop = threading.Thread(target=service.run, args=(slot, stop), name="scheduling-loop",
                            daemon=True)
    loop.start()
    host, port = server.server_address[:2]
    # One parseable line: tests and scripts that asked for port 0 read the port here.
    print(f"sluice scheduler: listening on http://{host}:{port} "
          f"(db {service.store.path}, executor {service.executor}, "
          f"auth {'token' if token_set else 'none'})", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        stop.set()
        loop.join(timeout=10)
        server.server_close()
        service.store.close()
    return 0
