"""The job registry (pure): each PS job's endpoints, its workers' progress, its flows.

The scheduler/launcher registers a job with its parameter servers and workers (IP and the
fixed ps-lite ``PORT`` each node listens on). The flows follow ps-lite's layout
(docs/design.md): push data and pull requests go worker -> server:server_port (push flow),
pull responses go server -> worker:worker_port (pull flow). Nothing is guessed from
traffic. Validation raises :class:`InputError`; a rejected body changes nothing. What a
body's shape cannot say (the request models and the OpenAPI document say the rest) raises
:class:`RuleBroken`, which names the field: ids unique within servers and within
workers, IPs that are hosts of the controller's topology, every endpoint once, a
progress report from a worker of the job.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Iterable

from controller.ranking import PULL, PUSH, FlowKey
from sluice_common.errors import InputError, RuleBroken
from sluice_common.job_id import JOB_ID_RE, JOB_ID_RULE

CONTROL = "control"          # a worker's control messages to the ps-lite scheduler
SCHEDULER_ID = "scheduler"
# Optional size fields (from the scheduler's estimator) used by the job ranking rules.
SIZE_FIELDS = ("total_batches", "bytes_per_batch")
# Every field of a registration, in the order of its text (the state file reads these too).
JOB_FIELDS = ("id", "servers", "workers", "scheduler", *SIZE_FIELDS)
_ENDPOINT_FIELDS = {"id", "ip", "port"}
_PROGRESS_FIELDS = {"worker", "batch"}
MAX_ENDPOINTS = 256


@dataclass(frozen=True)
class Endpoint:
    id: str
    ip: str
    port: int


@dataclass
class Job:
    id: str
    servers: tuple[Endpoint, ...]
    workers: tuple[Endpoint, ...]
    cookie: int
    batches: dict[str, int] = field(default_factory=dict)   # worker id -> last batch
    # The ps-lite scheduler (rendezvous, barriers): workers send it control messages.
    scheduler: Endpoint | None = None
    total_batches: int | None = None     # epochs * dataset_size / batch_size (all workers)
    bytes_per_batch: int | None = None   # bytes one batch pushes (and pulls): the parameters
    # when it registered (wall-clock s: the ``aged`` rule's registration time, kept across
    # restarts, which the monotonic clock is not)
    registered_s: float = field(default=0.0, compare=False)
    # worker id -> the batch its last answer said to report at (controller/report_hints.py)
    report_at: dict[str, int | None] = field(default_factory=dict, repr=False, compare=False)
    _flows: list[FlowKey] | None = field(default=None, init=False, repr=False, compare=False)
    _control: dict[str, FlowKey] | None = field(default=None, init=False, repr=False,
                                                compare=False)

    def flows(self) -> list[FlowKey]:
        """The job's flows (computed once: endpoints never change after registration)."""
        if self._flows is None:
            self._flows = self._derive_flows()
        return self._flows

    def _derive_flows(self) -> list[FlowKey]:
        out = []
        for w in self.workers:
            for s in self.servers:
                if w.ip == s.ip:      # co-located: the traffic never touches the fabric
                    continue
                out.append(FlowKey(self.id, PUSH, w.id, s.id, w.ip, s.ip, s.port))
                out.append(FlowKey(self.id, PULL, w.id, s.id, s.ip, w.ip, w.port))
        return out

    def control_flow(self, flow: FlowKey) -> FlowKey | None:
        """The control flow that rides on ``flow``: a worker's messages to the ps-lite
        scheduler (start-up rendezvous, barriers, the closing handshake) take the level
        of its pull from the first server, the server the scheduler runs beside. None
        for any other flow, without a registered scheduler, or when the worker shares
        the scheduler's host. Control flows are not ranked or counted as job bytes:
        they are a few small messages, but left in the least urgent class they wait
        behind every other job's bulk transfer, at start and at the end of the job."""
        if self._control is None:
            sched = self.scheduler
            self._control = {} if sched is None else {
                w.id: FlowKey(self.id, CONTROL, w.id, SCHEDULER_ID, w.ip, sched.ip, sched.port)
                for w in self.workers if w.ip != sched.ip}
        if flow.kind != PULL or flow.server != self.servers[0].id:
            return None
        return self._control.get(flow.worker)

    def batch_of(self, worker: str) -> int:
        return self.batches.get(worker, 0)

    def done_batches(self) -> int:
        """Batches finished, over all workers: a worker reports the batch it is on
        (numbered from 1), so batch N means N - 1 are done."""
        return sum(max(0, b - 1) for b in self.batches.values())

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "cookie": f"0x{self.cookie:x}",
                "servers": [vars(e) for e in self.servers],
                "workers": [vars(e) for e in self.workers],
                "batches": dict(sorted(self.batches.items())),
                **({"scheduler": vars(self.scheduler)} if self.scheduler else {}),
                **{k: getattr(self, k) for k in SIZE_FIELDS if getattr(self, k) is not None}}


class ProgressResult:
    ACCEPTED, STALE = "accepted", "stale"


def _endpoint(source: str, job: str, role: str, i: int, raw: Any,
              known_ips: set[str] | None) -> Endpoint:
    label = f"job '{job}' {role} #{i + 1}"
    path = "scheduler" if role == "scheduler" else f"{role}s[{i}]"      # the body's field
    if not isinstance(raw, dict):
        raise InputError(source, "must be an object with id, ip, port", element=label)
    unknown = sorted(set(raw) - _ENDPOINT_FIELDS)
    if unknown:
        raise InputError(source, "unknown field (allowed: id, ip, port)", element=label,
                         field=unknown[0])
    eid = raw.get("id", f"{role[0]}{i}")
    if not isinstance(eid, str) or not JOB_ID_RE.match(eid):
        raise InputError(source, "must be a short name of letters, digits, . _ -",
                         element=label, field="id")
    ip = raw.get("ip")
    try:
        ip = str(ipaddress.IPv4Address(ip))
    except (ValueError, TypeError):
        raise InputError(source, f"not an IPv4 address: {ip!r}", element=label, field="ip")
    if known_ips is not None and ip not in known_ips:
        raise RuleBroken(source, f"{ip} is not a host of the topology", element=label,
                         field=f"{path}.ip")
    port = raw.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InputError(source, f"must be an integer 1..65535, got {port!r}", element=label,
                         field="port")
    return Endpoint(eid, ip, port)


def _distinct_endpoints(source: str, job_id: str, lists: dict, scheduler) -> None:
    """Every endpoint (ip, port) of a job once: the same one twice, or a server on a
    worker's address, would make two flows one."""
    seen: dict[tuple[str, int], str] = {}
    named = [(f"{role}[{i}]", e) for role in ("servers", "workers")
             for i, e in enumerate(lists[role])]
    if scheduler is not None:
        named.append(("scheduler", scheduler))
    for where, e in named:
        other = seen.get((e.ip, e.port))
        if other is not None:
            raise RuleBroken(source, f"endpoint {e.ip}:{e.port} is also {other}; each "
                                "server, worker and the scheduler needs its own address "
                                "and port", element=f"job '{job_id}'", field=where)
        seen[(e.ip, e.port)] = where


def parse_job(body: Any, known_ips: set[str] | None = None, source: str = "API body") -> Job:
    """Validate a registration body; returns a Job with cookie 0 (the registry assigns it)."""
    if not isinstance(body, dict):
        raise InputError(source, "must be a JSON object with id, servers, workers")
    unknown = sorted(set(body) - set(JOB_FIELDS))
    if unknown:
        raise InputError(source, f"unknown field (allowed: {', '.join(JOB_FIELDS)})",
                         field=unknown[0])
    job_id = body.get("id")
    if not isinstance(job_id, str) or not JOB_ID_RE.match(job_id):
        raise InputError(source, f"must be {JOB_ID_RULE}", element="job", field="id")
    lists = {}
    for role in ("servers", "workers"):
        raw = body.get(role)
        if not isinstance(raw, list) or not raw:
            raise InputError(source, "must be a non-empty list of {id, ip, port}",
                             element=f"job '{job_id}'", field=role)
        if len(raw) > MAX_ENDPOINTS:
            raise InputError(source, f"at most {MAX_ENDPOINTS} entries",
                             element=f"job '{job_id}'", field=role)
        lists[role] = tuple(_endpoint(source, job_id, role[:-1], i, e, known_ips)
                            for i, e in enumerate(raw))
        ids = [e.id for e in lists[role]]
        dup = next((i for i, x in enumerate(ids) if ids.index(x) < i), None)
        if dup is not None:
            raise RuleBroken(source, f"duplicate id '{ids[dup]}' (each of the job's {role} "
                             f"needs its own)", element=f"job '{job_id}'",
                             field=f"{role}[{dup}].id")
    scheduler = None
    if body.get("scheduler") is not None:
        scheduler = _endpoint(source, job_id, "scheduler", 0, body["scheduler"], known_ips)
    sizes = {}
    for name in SIZE_FIELDS:
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 < value < 2**62):
            raise InputError(source, f"must be a positive integer, got {value!r}",
                             element=f"job '{job_id}'", field=name)
        sizes[name] = value
    _distinct_endpoints(source, job_id, lists, scheduler)
    return Job(job_id, lists["servers"], lists["workers"], cookie=0, scheduler=scheduler,
               **sizes)


def parse_progress(body: Any, job: Job, source: str = "API body") -> tuple[str, int]:
    if not isinstance(body, dict):
        raise InputError(source, "must be a JSON object with worker, batch")
    unknown = sorted(set(body) - _PROGRESS_FIELDS)
    if unknown:
        raise InputError(source, "unknown field (allowed: worker, batch)", field=unknown[0])
    worker, batch = body.get("worker"), body.get("batch")
    if not isinstance(worker, str):
        raise InputError(source, f"must be a worker id, got {worker!r}",
                         element=f"job '{job.id}'", field="worker")
    if worker not in {w.id for w in job.workers}:
        raise RuleBroken(source, f"not a worker of job '{job.id}': {worker!r}",
                         element=f"job '{job.id}'", field="worker")
    if isinstance(batch, bool) or not isinstance(batch, int) or not 0 <= batch < 2**62:
        raise InputError(source, f"must be an integer >= 0, got {batch!r}",
                         element=f"job '{job.id}'", field="batch")
    return worker, batch


class Registry:
    """Active jobs. Not thread-safe by itself: the service holds the lock."""

    COOKIE_BASE = 0x51 << 56   # 'Q' in the top byte: sluice job rules; low bits = job number

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self._next = 1
        self._owner: dict[tuple[str, str, int], str] = {}   # (src, dst, dst port) -> job

    def check_new(self, job: Job, source: str = "API body") -> None:
        """Conflicts with registered jobs (raises InputError; the API answers 409)."""
        if job.id in self.jobs:
            raise InputError(source, "a job with this id is already registered",
                             element=f"job '{job.id}'", field="id")
        for f in job.flows():
            other = self._owner.get((f.src_ip, f.dst_ip, f.dst_port))
            if other:
                raise InputError(source, f"flow {f.src_ip} -> {f.dst_ip}:{f.dst_port} already "
                                 f"belongs to job '{other}' (give each job its own ports)",
                                 element=f"job '{job.id}'")

    def add(self, job: Job, cookie: int | None = None) -> Job:
        self.check_new(job)
        if cookie is None:
            cookie = self.COOKIE_BASE | self._next
        self._next = max(self._next, (cookie & 0xFFFFFFFF) + 1)
        job.cookie = cookie
        self.jobs[job.id] = job
        for f in job.flows():
            self._owner[(f.src_ip, f.dst_ip, f.dst_port)] = job.id
        return job

    def remove(self, job_id: str) -> Job:
        job = self.jobs.pop(job_id)
        for f in job.flows():
            self._owner.pop((f.src_ip, f.dst_ip, f.dst_port), None)
        return job

    def report(self, job_id: str, worker: str, batch: int) -> str:
        """Record a progress report. Out-of-order or repeated reports (batch not above the
        last one from this worker) are stale and change nothing."""
        job = self.jobs[job_id]
        if worker in job.batches and batch <= job.batches[worker]:
            return ProgressResult.STALE
        job.batches[worker] = batch
        return ProgressResult.ACCEPTED

    def flows_with_batches(self) -> Iterable[tuple[FlowKey, int]]:
        for job in self.jobs.values():
            batches = job.batches
            for f in job.flows():
                yield f, batches.get(f.worker, 0)
