"""``sluice scheduler | submit | jobs | cancel``: the scheduler service and its clients.

    sluice scheduler [--topology two-rack] [--policy lyapunov] [--listen 127.0.0.1:8181]
                     [--db PATH] [--slot S] [--executor simulated|local|slurm]
    sluice submit FILE [--server URL]      # validated here first: exit 2, nothing sent
    sluice jobs [--json] [--state S] [ID]
    sluice cancel ID

The admin token comes from ``--token`` or (better: not visible in ``ps``) the
environment variable SLUICE_SCHEDULER_TOKEN; the server URL from ``--server`` or
SLUICE_SCHEDULER_URL.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from job_scheduler.service.client import (DEFAULT_URL, TOKEN_ENV, URL_ENV, SchedulerClient,
                                          ServiceError, Unreachable)
from sluice_common.errors import EXIT_BAD_INPUT, InputError

if TYPE_CHECKING:
    from job_scheduler.service.app import ServiceConfig

DEFAULT_LISTEN = "127.0.0.1:8181"


def default_db_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "sluice" / "scheduler.db"


# ---- sluice scheduler --------------------------------------------------------------------

def configure_scheduler(parser: argparse.ArgumentParser) -> None:
    from job_scheduler.core.policies import POLICY_NAMES
    from job_scheduler.core.policy_cli import add_price_priority_argument
    parser.add_argument("--topology", default="two-rack",
                        help="built-in name or YAML file (default: two-rack)")
    parser.add_argument("--policy", default="lyapunov",
                        help=f"one of {', '.join(POLICY_NAMES)} (default lyapunov): the "
                        "simulator's policies (job_scheduler.core.policies); las and sluice "
                        "suspend running jobs with a checkpoint and resume them later")
    parser.add_argument("--listen", default=DEFAULT_LISTEN,
                        help=f"HOST:PORT of the HTTP API (default {DEFAULT_LISTEN}; port 0 "
                        "picks a free one)")
    parser.add_argument("--db", type=Path, default=None,
                        help=f"SQLite job store (default {default_db_path()})")
    parser.add_argument("--slot", type=float, default=1.0,
                        help="seconds between scheduling decisions (default 1)")
    from job_scheduler.service import executor_registry
    parser.add_argument("--executor", choices=executor_registry.names(),
                        default="simulated",
                        help="what runs a started job (default simulated): "
                        f"{executor_registry.help_text()}")
    _configure_slurm(parser)
    parser.add_argument("--time-factor", type=float, default=1.0,
                        help="simulated executor: wall-clock seconds a job lasts per second "
                        "of its estimated run time (default 1; 0.001 makes a 1000-s job end "
                        "in 1 s, 1000 makes it last 11.6 days); the other executors ignore it")
    parser.add_argument("--local-command", default=None,
                        help="local executor: shell command per job instead of `sluice train`; {job_id} {name} {gpus} "
                        "{workers} {ps_hosts} {model} {batch_size} {epochs} {dataset_size} "
                        "{run_dir} are substituted")
    parser.add_argument("--max-retries", type=int, default=0,
                        help="re-queue a failed job up to N times (default 0: no retry)")
    parser.add_argument("--controller", default=None, metavar="URL",
                        help="SDN controller's northbound API: jobs are registered on start "
                        "and their flow rules removed when they end (admin token from env "
                        "SLUICE_CONTROLLER_TOKEN or SLUICE_ADMIN_TOKEN)")
    parser.add_argument("--controllers", default=None, metavar="FILE",
                        help="a controller per pod: YAML {controllers: {POD: URL}} naming "
                        "every pod (domain) of --topology; a job is registered with its "
                        "pod's controller (one whose placement spans pods with none, and "
                        "its events say so). Same admin token as --controller")
    parser.add_argument("--tls-cert", default=None,
                        help="PEM certificate: the API speaks HTTPS only (needs --tls-key; "
                             "clients trust it via env SLUICE_CA_FILE)")
    parser.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert")
    parser.add_argument("--token", default=None,
                        help=f"admin token for submit/cancel (or env {TOKEN_ENV})")
    parser.add_argument("--users", default=None, metavar="FILE",
                        help="YAML {users: [{name: UNIX_USER, token: TOKEN}]}: a submission "
                        "made with a user's token is that user's job; under --executor "
                        "slurm it runs and is accounted as that user (the service runs as "
                        "root). The admin token submits as the service's own account")
    parser.add_argument("--max-request-bytes", type=int, default=1 << 20,
                        help="larger request bodies get 413 (default %(default)s bytes, "
                             "1 MiB)")
    parser.add_argument("--V", type=float, default=None, help="Lyapunov penalty weight V (s)")
    parser.add_argument("--eps", type=float, default=None, help="Lyapunov Z growth per slot (s)")
    parser.add_argument("--profile", default=None, help="device profile YAML for the estimator")
    add_price_priority_argument(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def _configure_slurm(parser: argparse.ArgumentParser) -> None:
    """``--executor slurm``'s options: how jobs train, and the site's policy (every job's
    sbatch flags; a job's ``slurm:`` block overrides them field by field)."""
    parser.add_argument("--slurm-partition", default=None, help="slurm executor: partition")
    parser.add_argument("--slurm-compute", default="auto", choices=("auto", "torch", "emulated"),
                        help="slurm executor: the workers' compute (ps_runtime.compute)")
    parser.add_argument("--slurm-batches", type=int, default=None,
                        help="slurm executor: batches per worker (default: dataset_size * "
                        "epochs / (batch_size * workers))")
    parser.add_argument("--slurm-compute-s", type=float, default=None,
                        help="slurm executor, emulated compute: seconds per batch")
    parser.add_argument("--slurm-bytes-per-batch", type=int, default=None,
                        help="slurm executor, emulated compute: bytes on the wire per batch")
    parser.add_argument("--slurm-pending-timeout", type=float, default=600.0, metavar="S",
                        help="slurm executor: a job Slurm keeps pending longer (its reason "
                        "shown in `sluice jobs` meanwhile) is cancelled in Slurm and goes "
                        "back to sluice's queue (default 600; 0: it waits for ever)")
    parser.add_argument("--slurm-signal-s", type=int, default=120, metavar="N",
                        help="slurm executor: every job is submitted with --signal=B:USR1@N; "
                        "Slurm's warning before a preemption or the time limit makes the job "
                        "checkpoint and stop, and sluice re-queues it to resume "
                        "(default 120; 0: no warning)")
    parser.add_argument("--slurm-poll-interval", type=float, default=5.0, metavar="S",
                        help="slurm executor: seconds between looks at the running jobs (one "
                        "squeue for all of them, one sacct for those Slurm purged), apart "
                        "from --slot; between looks no Slurm command runs for them "
                        "(default 5; 0: every slot)")
    site = parser.add_argument_group(
        "Slurm site policy (--executor slurm; a job file's `slurm:` block overrides each "
        "for its job; Slurm judges the values at submission: one it refuses fails that job "
        "with Slurm's message)")
    site.add_argument("--slurm-account", default=None, metavar="NAME",
                      help="sbatch --account of every job")
    site.add_argument("--slurm-qos", default=None, metavar="NAME",
                      help="sbatch --qos of every job")
    site.add_argument("--slurm-time", default=None, metavar="TIME",
                      help="sbatch --time of every job (time limit: MINUTES, H:MM:SS, "
                      "D-HH:MM:SS; sites that require one refuse jobs without it)")
    site.add_argument("--slurm-constraint", default=None, metavar="FEATURES",
                      help="sbatch --constraint: node features every job needs (a100&ib)")
    site.add_argument("--slurm-gpu-type", default=None, metavar="TYPE",
                      help="GPUs requested as gpu:TYPE:N and only GPUs of TYPE counted as "
                      "capacity (default: any whole GPU; MIG slices never count)")
    site.add_argument("--slurm-cpus-per-gpu", type=int, default=None, metavar="N",
                      help="sbatch --cpus-per-gpu (default: Slurm's, one CPU per task)")
    site.add_argument("--slurm-mem-per-gpu", default=None, metavar="SIZE",
                      help="sbatch --mem-per-gpu (16G, 16000 in MB)")
    site.add_argument("--slurm-sbatch-flag", action="append", default=None, metavar="FLAG",
                      help="one more sbatch flag for every job, as one word, e.g. "
                      "--slurm-sbatch-flag=--reservation=maint (repeatable; flags sluice "
                      "sets itself are refused)")
    site.add_argument("--slurm-fabric-addresses", default=None, metavar="FILE",
                      help="YAML {node: address}: each node's data-fabric address (the "
                      "topology's) where it differs from Slurm's NodeAddr")


# ServiceConfig's fields (and the errors below it) -> the flags that set them (the rest:
# "--" and the field, "_" as "-")
SERVICE_FLAGS = {"V/eps": "--V/--eps", "tls": "--tls-cert/--tls-key",
                 "executor": "--executor slurm"}


def _parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise InputError("--listen", f"must be HOST:PORT, got {text!r}")
    try:
        port_n = int(port)
    except ValueError:
        raise InputError("--listen", f"port must be a number, got {port!r}")
    if not 0 <= port_n <= 65535:
        raise InputError("--listen", f"port must be 0..65535, got {port_n}")
    return host.strip("[]"), port_n


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def service_config(args: argparse.Namespace) -> ServiceConfig:
    """The namespace as a :class:`~job_scheduler.service.app.ServiceConfig` (field errors
    named by their flags by the caller); every field is the flag's namesake but db,
    listen, token and tls."""
    from dataclasses import fields

    from job_scheduler.service.app import ServiceConfig
    from sluice_common.http_service import check_tls_files
    from sluice_common.tokens import check_admin_token

    host, port = _parse_listen(args.listen)
    token = check_admin_token(args.token if args.token is not None else
                              os.environ.get(TOKEN_ENV), TOKEN_ENV, "--token", required=False)
    if not _is_loopback(host) and not token:
        raise InputError("--listen", f"refusing to serve the admin API on non-loopback "
                         f"address {host!r} without a token (--token or {TOKEN_ENV})")
    given = {f.name: getattr(args, f.name) for f in fields(ServiceConfig)
             if f.name in vars(args)}
    if "slurm_sbatch_flag" in given:
        given["slurm_sbatch_flag"] = tuple(given["slurm_sbatch_flag"] or ())
    return ServiceConfig(**{**given, "db": args.db or default_db_path(),
                            "listen": (host, port), "token": token,
                            "tls": check_tls_files(args.tls_cert, args.tls_key)})


def run_scheduler(args: argparse.Namespace) -> int:
    from sluice_common.malloc import return_large_buffers_to_the_system
    return_large_buffers_to_the_system()     # a long-lived service: see that module
    # Everything that can be wrong with the arguments is checked before anything starts.
    from sluice_common.errors import flag_error
    from job_scheduler.service.app import start

    from job_scheduler.service import executor_registry

    notice = None
    if executor_registry.kind(args.executor).starts_nothing:   # said at start
        real = [k for k in executor_registry.names()
                if not executor_registry.kind(k).starts_nothing]
        notice = (f"sluice scheduler: executor {args.executor}: jobs only pretend to run (no "
                  "process is started; each ends after its estimated C(n) * --time-factor "
                  f"seconds); --executor {' or '.join(real)} runs them")
    try:
        config = service_config(args)
    except ValueError as err:
        raise flag_error(err, SERVICE_FLAGS)
    try:
        return start(config, notice)
    except InputError as err:       # an option's field -> its flag
        raise flag_error(err, SERVICE_FLAGS)


# ---- clients --------------------------------------------------------------------------

def _add_client_args(parser: argparse.ArgumentParser, token: bool) -> None:
    parser.add_argument("--server", default=None,
                        help=f"scheduler URL (default ${URL_ENV} or {DEFAULT_URL})")
    if token:
        parser.add_argument("--token", default=None, help=f"admin token (or env {TOKEN_ENV})")


def _client(server: str | None, token: str | None = None) -> SchedulerClient:
    """The scheduler's client: ``server`` / ``token`` as given (None: from the environment)."""
    try:
        return SchedulerClient.from_env(server, token)
    except ValueError as err:
        raise InputError("--server", str(err))


def _service_failure(command: str, err: Exception) -> int:
    if isinstance(err, ServiceError):
        if err.status in (401, 403):      # no token, a wrong one, a user's: it says which
            said = err.body.get("error") or "the scheduler wants its admin token"
            hint = "" if TOKEN_ENV in said else f" (--token or {TOKEN_ENV})"
            print(f"sluice {command}: error: {said}{hint}", file=sys.stderr)
            return 1
        print(f"sluice {command}: error: {err.body.get('error', err)}", file=sys.stderr)
        return EXIT_BAD_INPUT if err.status in (400, 404, 409, 413, 422) else 1
    print(f"sluice {command}: error: {err}", file=sys.stderr)
    return 1


def configure_submit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="job description YAML")
    _add_client_args(parser, token=True)
    parser.add_argument("--cap-gpus", action="store_true",
                        help="cap max_gpus at the point of diminishing returns (Liquid's "
                             "resource estimator) before submitting; without it, only warn")
    parser.add_argument("--retry-seconds", type=float, default=15.0,
                        help="keep retrying (same idempotency key) while the service is "
                        "unreachable (default 15)")


def run_submit(args: argparse.Namespace) -> int:
    from sluice_common.jobspec import load_jobs
    from job_scheduler.core.gpu_advice import advise, capped_text
    specs = load_jobs(args.file)              # InputError -> exit 2, nothing sent
    text = args.file.read_text(encoding="utf-8")
    advice = advise(specs)
    for a in advice:
        if a.beyond:
            print(a.warning() + (" - capped" if args.cap_gpus else ""), file=sys.stderr)
    if args.cap_gpus and any(a.beyond for a in advice):
        text = capped_text(text, advice)
    client = _client(args.server, args.token)
    try:
        result = client.submit(text, source=args.file.name, retry_seconds=args.retry_seconds)
    except (ServiceError, Unreachable) as err:
        return _service_failure("submit", err)
    note = " (already submitted)" if result.get("duplicate") else ""
    print(f"submission {result['submission']}{note}: queued {len(specs)} job(s): "
          + ", ".join(f"{spec.name}={jid}" for spec, jid in zip(specs, result["jobs"])))
    later = [s for s in result.get("schedule", []) if s.get("arrival")]
    if later:      # the service honours `arrival`: seconds after this submission
        print("arriving later: " + ", ".join(f"{s['name']} in {s['arrival']:g} s"
                                             for s in later))
    return 0


def configure_jobs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", nargs="?", type=int, default=None,
                        help="one job whole: why it waits, its estimates, its events")
    _add_client_args(parser, token=False)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--state", default=None,
                        choices=("queued", "running", "finished", "failed", "cancelled"))


def run_jobs(args: argparse.Namespace) -> int:
    from job_scheduler.service.jobs_text import one_job, table

    try:
        client = _client(args.server)
        jobs = [client.job(args.id)] if args.id is not None else client.jobs(args.state)
    except (ServiceError, Unreachable) as err:
        return _service_failure("jobs", err)
    if args.json:
        print(json.dumps(jobs[0] if args.id is not None else jobs, indent=2, sort_keys=True))
        return 0
    lines = one_job(jobs[0], time.time()) if args.id is not None else table(jobs, time.time())
    print("\n".join(lines))
    return 0


def configure_cancel(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", type=int, help="job id (see `sluice jobs`)")
    _add_client_args(parser, token=True)


def run_cancel(args: argparse.Namespace) -> int:
    try:
        job = _client(args.server, args.token).cancel(args.id)
    except (ServiceError, Unreachable) as err:
        return _service_failure("cancel", err)
    print(f"job {job['id']} ({job['name']}) cancelled")
    return 0
