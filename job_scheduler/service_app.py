"""Wiring of the scheduler service process: store + executors + policy + HTTP server.

``serve`` reconciles what a previous run left behind, then runs the scheduling loop in a
thread and the HTTP server in the main thread until SIGTERM/SIGINT. Stopping the
service stops nothing else: simulated jobs keep their recorded end times and local jobs
keep running in their own sessions; the next start reconciles them.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path

from job_scheduler.estimator import Estimator, effective_bandwidth
from job_scheduler.executors import LocalExecutor, SimulatedExecutor, template_command
from job_scheduler.jobspec import JobSpec
from job_scheduler.service import SchedulerService
from job_scheduler.service_api import SchedulerHTTPServer
from job_scheduler.service_policy import PolicyStep, StartDecision
from job_scheduler.store import JobStore
from sluice.errors import InputError
from topologies import Topology

log = logging.getLogger("sluice.scheduler")


def estimated_duration(topology: Topology, estimator: Estimator):
    """C(n) of the job at the effective bandwidth of its actual placement."""

    def duration(spec: JobSpec, decision: StartDecision) -> float:
        bw = effective_bandwidth(topology, decision.ps_hosts, decision.worker_hosts)
        return estimator.C(spec, decision.gpus, bw)

    return duration


def build_service(*, topology: Topology, policy: PolicyStep, estimator: Estimator,
                  db_path: Path, executor: str, time_factor: float = 1.0,
                  local_command: str | None = None, max_retries: int = 0,
                  controller_url: str | None = None, token: str | None = None,
                  listen: tuple[str, int] = ("127.0.0.1", 8181),
                  max_body: int = 1 << 20) -> tuple[SchedulerService, SchedulerHTTPServer]:
    try:
        store = JobStore(db_path)
    except Exception as err:   # sqlite3.Error, OSError: unusable path or not a database
        raise InputError(str(db_path), f"cannot open the job store: {err}")
    executors = {
        "simulated": SimulatedExecutor(estimated_duration(topology, estimator), time_factor),
        # Always present, so jobs started by a previous run's local executor are
        # reconciled even when this run simulates.
        "local": LocalExecutor(Path(db_path).parent / (Path(db_path).name + ".runs"),
                               template_command(local_command) if local_command else None),
        # (no --local-command: `sluice train`, the PS runtime)
    }
    controller = None
    if controller_url:
        from job_scheduler.service_controller import ControllerNotifier
        controller = ControllerNotifier(controller_url, topology)
        log.info("controller %s: jobs are registered on start, removed when they end",
                 controller.client.url)
    service = SchedulerService(store, topology, policy, executors, executor,
                               max_retries=max_retries, controller=controller)
    try:
        server = SchedulerHTTPServer(listen, service, token=token, max_body=max_body)
    except OSError as err:
        store.close()
        raise InputError("--listen", f"cannot listen on {listen[0]}:{listen[1]}: "
                         f"{err.strerror or err}")
    return service, server


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
