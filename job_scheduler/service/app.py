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
from dataclasses import dataclass
from pathlib import Path

from job_scheduler.core.estimator import Estimator
from job_scheduler.service import executor_registry
from job_scheduler.service.executor_registry import ExecutorContext
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.api import SchedulerHTTPServer
from job_scheduler.service.policy_step import PolicyStep
from job_scheduler.service.store import JobStore
from sluice_common.errors import InputError, option_error
from topologies import Topology

log = logging.getLogger("sluice.scheduler")


@dataclass(frozen=True)
class ServiceConfig:
    """What ``sluice scheduler`` is asked, as one frozen value: built once from the
    command line (``job_scheduler.service.cli``) and handed to :func:`start`; nothing
    below the CLI reads the argparse namespace. Its checks raise
    ``ValueError("field: message")``; only the CLI turns a field into its flag."""
    db: Path                             # SQLite job store
    topology: str = "two-rack"           # built-in name or YAML file
    policy: str = "lyapunov"
    listen: tuple[str, int] = ("127.0.0.1", 8181)   # port 0: a free one
    slot: float = 1.0                    # seconds between scheduling decisions
    executor: str = "simulated"          # a name of executor_registry
    slurm_partition: str | None = None
    slurm_compute: str = "auto"          # auto | torch | emulated (ps_runtime.compute)
    slurm_batches: int | None = None
    slurm_compute_s: float | None = None
    slurm_bytes_per_batch: int | None = None
    # site policy (slurm_client.site.SiteOptions): every job's, a job's `slurm:` overrides
    slurm_account: str | None = None
    slurm_qos: str | None = None
    slurm_time: str | None = None
    slurm_constraint: str | None = None
    slurm_gpu_type: str | None = None
    slurm_cpus_per_gpu: int | None = None
    slurm_mem_per_gpu: str | None = None
    slurm_sbatch_flag: tuple[str, ...] = ()
    slurm_fabric_addresses: str | None = None     # YAML {node: data-fabric address}
    slurm_pending_timeout: float = 600.0  # s a job may stay PENDING in Slurm (0: for ever)
    slurm_signal_s: int = 120            # sbatch --signal=B:USR1@N: checkpoint warning (0: none)
    slurm_poll_interval: float = 5.0     # s between batched looks at Slurm (0: every slot)
    time_factor: float = 1.0             # simulated executor: wall s per estimated s
    local_command: str | None = None     # local executor: shell command per job
    max_retries: int = 0
    controller: str | None = None        # the SDN controller's northbound API URL
    controllers: str | None = None       # YAML {controllers: {pod: URL}}: one per pod
    token: str | None = None             # admin token of the API (checked)
    users: str | None = None             # YAML: a user's own token -> Unix user
    tls: tuple[str, str] | None = None   # (cert, key), checked
    max_request_bytes: int = 1 << 20
    V: float | None = None               # lyapunov only (None: the policy's default)
    eps: float | None = None
    profile: str | None = None           # device profile for the estimator
    price_priority: str | None = None    # sluice: price placements under this rule (None: off)
    verbose: bool = False

    def __post_init__(self):
        checks = [
            ("executor", self.executor in executor_registry.names(),
             f"must be one of {', '.join(executor_registry.names())}, "
             f"got {self.executor!r}"),
            ("listen", 0 <= self.listen[1] <= 65535,
             f"port must be 0..65535, got {self.listen[1]}"),
            ("slot", self.slot > 0, "must be > 0"),
            ("time_factor", self.time_factor > 0, "must be > 0"),
            ("max_retries", self.max_retries >= 0, "must be >= 0"),
            ("max_request_bytes", self.max_request_bytes >= 1024, "must be >= 1024"),
            ("V/eps", self.policy == "lyapunov" or (self.V is None and self.eps is None),
             "only mean something with the lyapunov policy"),
            ("slurm_batches", self.slurm_batches is None or self.slurm_batches >= 1,
             "must be >= 1"),
            ("slurm_bytes_per_batch",
             self.slurm_bytes_per_batch is None or self.slurm_bytes_per_batch >= 1,
             "must be >= 1"),
            ("slurm_compute_s", self.slurm_compute_s is None or self.slurm_compute_s >= 0,
             "must be >= 0"),
            ("slurm_signal_s", self.slurm_signal_s >= 0, "must be >= 0 (0: no warning)"),
            ("slurm_pending_timeout", self.slurm_pending_timeout >= 0,
             "must be >= 0 (0: a job may wait in Slurm for ever)"),
            ("slurm_poll_interval", self.slurm_poll_interval >= 0, "must be >= 0 (0: every slot)")]
        for name, ok, message in checks:
            if not ok:
                raise ValueError(f"{name}: {message}")
        from job_scheduler.core.policies import check_price_priority
        check_price_priority(self.price_priority, self.policy)
        self.slurm_site()

    def slurm_site(self):
        """The site policy of ``--executor slurm`` (ValueError naming the first bad field)."""
        from slurm_client.site import SiteOptions, site_problems

        values = dict(account=self.slurm_account, qos=self.slurm_qos, time=self.slurm_time,
                      partition=self.slurm_partition, constraint=self.slurm_constraint,
                      gpu_type=self.slurm_gpu_type, cpus_per_gpu=self.slurm_cpus_per_gpu,
                      mem_per_gpu=self.slurm_mem_per_gpu,
                      sbatch_flags=tuple(self.slurm_sbatch_flag))
        problems = site_problems(values)
        if problems:
            field, _, message = problems[0].partition(": ")
            field = "sbatch_flag" if field == "sbatch_flags" else field
            raise ValueError(f"slurm_{field}: {message}")
        return SiteOptions(**values)


def start(config: ServiceConfig, notice: str | None = None) -> int:
    """Everything ``config`` names is loaded and checked (bad input: InputError, nothing
    started), then the service runs until SIGTERM/SIGINT; ``notice``: said on stderr
    once all is checked, before the service is built."""
    from job_scheduler.core.policies import DEFAULT_EPS, DEFAULT_V
    from job_scheduler.service.policy_step import make_policy_step
    from topologies import load_topology

    topology = load_topology(config.topology)
    try:
        estimator = Estimator(config.profile)
    except ValueError as err:
        raise option_error("profile", str(err))
    options = {}
    if config.policy == "lyapunov":
        options = {"V": DEFAULT_V if config.V is None else config.V,
                   "eps": DEFAULT_EPS if config.eps is None else config.eps}
    if config.price_priority is not None:
        options["price_priority"] = config.price_priority
    policy = make_policy_step(config.policy, topology, estimator, slot=config.slot, **options)
    chosen = executor_registry.kind(config.executor)
    # the chosen executor's options, checked before anything is built
    executor_options = chosen.options and chosen.options(config, topology)

    logging.basicConfig(level=logging.DEBUG if config.verbose else logging.INFO,
                        stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if notice:
        print(notice, file=sys.stderr, flush=True)
    service, server = build_service(config, topology, policy, estimator, executor_options)
    return serve(service, server, config.slot, token_set=bool(config.token))


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


def build_service(config: ServiceConfig, topology: Topology, policy: PolicyStep,
                  estimator: Estimator, executor_options=None
                  ) -> tuple[SchedulerService, SchedulerHTTPServer]:
    """The service and its (bound) HTTP server; ``config``'s topology, policy, V, eps,
    profile and slot are the caller's (``topology``, ``policy``, ``estimator``), and so
    are the chosen executor's options (``executor_options``; None: from ``config``)."""
    from job_scheduler.service.users import load_users

    db_path, executor, listen = Path(config.db), config.executor, config.listen
    users = load_users(config.users)      # token -> Unix user (the API records who submits)
    # Every registered executor, chosen or not: jobs a previous run started with another
    # one are still polled (by pid, by Slurm job id, ...) and reconciled.
    executors = {name: executor_registry.kind(name).make(
        ExecutorContext(config, topology, estimator, db_path, chosen=name == executor),
        executor_options if name == executor else None) for name in executor_registry.names()}
    from job_scheduler.service.controller_map import controller_link
    controller = controller_link(config.controller, config.controllers, topology)
    try:   # bind first: a busy port must not leave anything behind
        server = SchedulerHTTPServer(listen, None, token=config.token,
                                     max_body=config.max_request_bytes, tls=config.tls)
    except OSError as err:
        raise option_error("listen", f"cannot listen on {listen[0]}:{listen[1]}: "
                         f"{err.strerror or err}")
    try:
        lock = _lock_store(db_path)
        store = JobStore(db_path)
    except InputError:
        server.server_close()
        raise
    except Exception as err:   # sqlite3.Error, OSError: unusable path or not a database
        server.server_close()
        raise InputError(str(db_path), f"cannot open the job store: {err}")
    store.lock_file = lock     # held (flock) for the life of the process
    if controller is not None:
        log.info("controller %s: jobs are registered on start, removed when they end",
                 controller.where)
    service = SchedulerService(store, topology, policy, executors, executor,
                               max_retries=config.max_retries, controller=controller,
                               capacity=executor_registry.kind(executor).capacity(
                                   executors[executor]))
    try:
        service.check_running_fit()
    except InputError:
        server.server_close()
        store.close()
        raise
    server.service = service
    server.users = users
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
    if not token_set:
        from sluice_common.tokens import no_admin_token_warning
        log.warning(no_admin_token_warning("submit jobs and cancel every job",
                                           "SLUICE_SCHEDULER_TOKEN", "--token"))
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        stop.set()
        loop.join(timeout=10)
        server.server_close()
        service.store.close()
    return 0
