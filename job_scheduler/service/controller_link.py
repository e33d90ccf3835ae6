"""Closing the loop: the scheduler service tells the SDN controller about its jobs.

When a job starts, its exact endpoints (the topology IPs of its PS and worker hosts and
the ps-lite ports of ``ps_runtime.plan.PortPlan``: the port block its executor reserved)
are registered with the controller, so it recognises the job's push/pull flows without
guessing. When a job ends — finished, failed (a worker crashed) or cancelled — the job
is removed and the controller deletes its flow rules. With a controller per pod,
job_scheduler/service/controller_map.py picks the one of the job's pod.

A job's identity at the controller is its submission's, not its name: the service's job
id, unique per submission, behind the name as a label (``resnet-a.17``, see
:func:`controller_job_id`). The same job file submitted twice gives two live jobs of
one name; both are registered, each under its own identity, and both jobs' flows are
classified. The name alone would have let the second registration be refused (a job
with this id is already registered) and its flows travel in the least urgent class.
The job's processes get that identity (env ``SLUICE_CONTROLLER_JOB_ID``) and report
their progress under it (ps_runtime/progress.py).

A registration that fails (the controller down, refusing, or the job spanning pods) does
not stop the job: it is recorded on the job (``controller`` in ``GET /jobs/{id}``: state
``pending`` while it is retried, ``registered``, or ``failed`` once the job ended without
it; the error and the attempts) and in its events, and retried with a growing delay
(:data:`RETRY_DELAYS_S`) until it succeeds or the job ends (:class:`Registrations`).
"""

from __future__ import annotations

import logging
import os
import re

from job_scheduler.service.store import JobRecord
from ps_runtime.plan import HostPlan, PortPlan, registration
from sluice_common.errors import option_error
from topologies import Topology

log = logging.getLogger("sluice.scheduler.controller")

CONTROLLER_TOKEN_ENVS = ("SLUICE_CONTROLLER_TOKEN", "SLUICE_ADMIN_TOKEN")
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")


# Seconds between a failed registration and the next attempt: doubling, then every
# minute until the job ends (a controller restarting is back within a few seconds; one
# down for long costs one request a minute per job).
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 60.0)
CONTROLLER_JOB_ENV = "SLUICE_CONTROLLER_JOB_ID"


def controller_job_id(job: JobRecord) -> str:
    """The job's identity at the controller: its name as a label, then the service's job
    id, which is unique per submission (``NAME.ID``; the name shortened so that the
    whole stays within the controller's 64 characters). Two live jobs of one name are
    two identities; the job's workers report progress under it."""
    suffix = f".{job.id}"
    return _BAD_ID_CHARS.sub("-", job.name)[:64 - len(suffix)] + suffix


def retry_delay(attempts: int) -> float:
    """The wait after the ``attempts``-th failed registration (1, 2, 4 ... 60 s)."""
    return RETRY_DELAYS_S[min(max(attempts, 1), len(RETRY_DELAYS_S)) - 1]


REGISTERED, PENDING, FAILED = "registered", "pending", "failed"
# the events a job's registration leaves (kind, detail)
REGISTERED_EVENT, ERROR_EVENT = "controller-registered", "controller-error"
_START_EVENTS = ("started", "resumed", "migrated")
RETRIED, NOT_RETRIED = "register: ", "register, not retried: "   # an error event's detail
REGISTER_ERRORS = (RETRIED, NOT_RETRIED)


def registration_view(events: list[tuple[float, str, str | None]], running: bool,
                      attempts: int | None = None) -> dict | None:
    """``{state, id?, error?, attempts}`` of the job's registration at the controller for
    its last start, from its events (what a restarted service knows too); None when it
    was never to be registered. ``attempts``: the service's own count, which goes on
    when an attempt fails the way the previous one did (only a change is an event)."""
    view: dict | None = None
    for _at, kind, detail in events:
        if kind in _START_EVENTS:
            view = None
        elif kind == REGISTERED_EVENT:        # detail: "ID" or "ID, attempt N"
            ident, _, nth = (detail or "").partition(", attempt ")
            view = {"state": REGISTERED, "id": ident, "error": None,
                    "attempts": int(nth) if nth.isdigit()
                    else (view or {}).get("attempts", 0) + 1}
        elif kind == ERROR_EVENT and (detail or "").startswith(REGISTER_ERRORS):
            final = detail.startswith(NOT_RETRIED)
            view = {"state": FAILED if final else PENDING,
                    "error": detail.split(": ", 1)[1],
                    "attempts": (view or {}).get("attempts", 0) + 1}
    if view is None:
        return None
    if attempts is not None and view["state"] == PENDING:
        view["attempts"] = max(view["attempts"], attempts)
    if view["state"] == PENDING and not running:
        view["state"] = FAILED          # the job ended before the controller took it
    return view


def registered_detail(job: JobRecord, attempt: int = 1) -> str:
    """The detail of a job's ``controller-registered`` event."""
    return controller_job_id(job) + (f", attempt {attempt}" if attempt > 1 else "")


class Registrations:
    """The running jobs whose registration failed, and when each is tried again. Pure
    bookkeeping (the service makes the calls, holding its lock): a job is here from its
    first failure until it is registered or ends."""

    def __init__(self) -> None:
        self._pending: dict[int, tuple[int, float, str]] = {}  # id -> (attempts, next, error)

    def failed(self, job_id: int, now: float, error: str) -> tuple[int, bool]:
        """Record a failed attempt: (attempts so far, whether the error is new)."""
        attempts, _, last = self._pending.get(job_id, (0, 0.0, None))
        attempts += 1
        self._pending[job_id] = (attempts, now + retry_delay(attempts), error)
        return attempts, error != last

    def resume(self, job_id: int, attempts: int, error: str, now: float) -> None:
        """A job a previous run of the service left unregistered: try again now."""
        self._pending[job_id] = (attempts, now, error)

    def due(self, now: float) -> list[int]:
        return sorted(j for j, (_, at, _) in self._pending.items() if at <= now)

    def attempts(self, job_id: int) -> int | None:
        entry = self._pending.get(job_id)
        return entry[0] if entry else None

    def drop(self, job_id: int) -> None:
        self._pending.pop(job_id, None)

    def __contains__(self, job_id: int) -> bool:
        return job_id in self._pending


class ControllerNotifier:
    def __init__(self, url: str, topology: Topology):
        try:
            from controller.client import ControllerClient, ControllerError
        except ImportError as err:
            raise option_error("controller", f"the controller client is not available: {err}")
        token = next(filter(None, map(os.environ.get, CONTROLLER_TOKEN_ENVS)), None)
        if not token:
            raise option_error("controller", "the controller's admin token is needed (env "
                             f"{' or '.join(CONTROLLER_TOKEN_ENVS)})")
        # https: what docs/deploy.md asks for when the API is off loopback (the client
        # checks the certificate against the system CAs, or SLUICE_CA_FILE)
        if not url.startswith(("http://", "https://")):
            raise option_error("controller", f"must be an http:// or https:// URL, got {url!r}")
        self.client = ControllerClient(url, admin_token=token)
        self.Refused = ControllerError
        self.topology = topology
        self.where = self.client.url      # what the service's log says it talks to

    def job_started(self, job: JobRecord, base_port: int | None = None) -> dict[str, str]:
        """Register the job under its own identity (:func:`controller_job_id`, unique per
        submission: two live jobs of one name are both registered, each classified) with
        the ports of ``base_port``, the block its executor reserved (None: the name's
        default block). Returns environment for the job's processes (the controller URL,
        the job's identity there and its progress token), never stored."""
        placement = job.placement or {}
        hosts = HostPlan.on_hosts(self.topology, list(placement["ps_hosts"]),
                                  list(placement["worker_hosts"]))
        body = registration(controller_job_id(job), hosts,
                            PortPlan.for_job(job.name, hosts, base_port))
        try:
            answer = self.client.register_job(body)
        except self.Refused as err:
            # The identity is this submission's own: a job registered under it is this
            # job, from an attempt whose answer was lost (a timeout). Its token is gone
            # with that answer: remove it and register again.
            if err.status != 409 or "already registered" not in err.reason:
                raise
            self.client.remove_job(body["id"])
            answer = self.client.register_job(body)
        env = {"SLUICE_CONTROLLER_URL": self.client.url,
               CONTROLLER_JOB_ENV: controller_job_id(job)}
        if isinstance(answer, dict) and answer.get("token"):
            env["SLUICE_CONTROLLER_JOB_TOKEN"] = answer["token"]
        return env

    def job_ended(self, job: JobRecord) -> None:
        self.client.remove_job(controller_job_id(job))

