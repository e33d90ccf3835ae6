"""The durable scheduler service: queue, decide each slot, run, reconcile, release.

State lives in the :class:`~job_scheduler.service.store.JobStore` (SQLite), never only in
memory. The free GPUs are re-derived from the running jobs' recorded placements at every
slot, so GPUs cannot leak: a job that reaches finished/failed/cancelled stops counting
the moment its state is written. After a restart the first slot polls every 'running'
job through its executor (see ``executors.py``) and so reconciles what happened while
the service was down.

Failure policy (a worker crashing mid-job): the job's process exits
non-zero (or vanishes), the job is marked ``failed`` with the reason, its GPUs return to
the pool and, when a controller is configured, its flow rules are removed
(``ControllerClient.remove_job``). No retry by default; with ``max_retries=N`` a failed
job is put back at the head of the queue up to N times (``attempts`` counts starts).
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from job_scheduler.service import controller_link as ctl
from job_scheduler.service.executor_protocol import ControllerLink, Executor
from job_scheduler.service.executors import Outcome
from job_scheduler.service.gpu_records import held_state
from sluice_common.jobspec import JobSpec, parse_jobs_text
from job_scheduler.service.submission_check import LARGE_BODY, check_in_child
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.decisions import QueuedJob, StartDecision, Suspend
from job_scheduler.service.policy_step import PolicyStep
from job_scheduler.service.store import DuplicateSubmission, JobRecord, JobStore, JobUpdate
from job_scheduler.service import suspending
from job_scheduler.service.waits import Waits
from sluice_common.errors import InputError, RuleBroken, option_error
from topologies import Topology

log = logging.getLogger("sluice.scheduler")

MAX_JOBS_PER_SUBMISSION = 10_000
# what a job that goes back to the queue forgets of its run
_REQUEUED = dict(state="queued", gpus=None, placement=None, executor=None, started_at=None,
                 expected_end=None, pid=None, pid_start=None, external_id=None)


@dataclass(frozen=True)
class SubmitResult:
    submission_id: int
    job_ids: list[int]
    duplicate: bool = False
    # per job: {id, name, arrival, not_before} (the time it may start at the earliest)
    schedule: list[dict] = dataclasses.field(default_factory=list)


class NotFound(Exception):
    pass


class Conflict(Exception):
    pass


class SchedulerService:
    def __init__(self, store: JobStore, topology: Topology, policy: PolicyStep,
                 executors: Mapping[str, Executor], executor: str, *, max_retries: int = 0,
                 controller: ControllerLink | None = None,
                 clock: Callable[[], float] = time.time,
                 capacity: Callable[[ClusterState, Sequence[JobRecord]], None] | None = None):
        if executor not in executors:
            raise ValueError(f"executor {executor!r} not in {sorted(executors)}")
        if getattr(policy, "preemptive", False) and not hasattr(executors[executor], "suspend"):
            raise option_error("policy", f"{policy.name} suspends running jobs; the "
                               f"{executor} executor cannot (use another policy)")
        self.store = store
        self.topology = topology
        self._capacities = {h.name: h.gpus for h in topology.hosts}   # GPUs per host
        self.policy = policy
        self.executors = dict(executors)
        self.executor = executor
        self.max_retries = max_retries
        self.controller = controller
        self.clock = clock
        # The resource manager's word on capacity (the Slurm executor's): takes from the
        # state what sluice may not use (down/drained nodes, other users' GPUs).
        self.capacity = capacity
        self.registrations = ctl.Registrations()   # failed registrations, retried
        # Decisions (tick), cancels and the wait forecast's reads are serialised;
        # submissions only append rows.
        self.slot_lock = threading.RLock()
        self.ticks = 0
        # The queue in memory (the store stays the truth; this is read from it once and
        # then follows every committed change), so a slot costs O(jobs it starts or
        # ends), not O(queue). Submissions never take ``slot_lock``: the store hands their
        # jobs over in commit order (``on_queued``) and the next slot takes them in.
        self._queued: dict[int, JobRecord] = {}
        # Jobs whose arrival lies ahead (``not_before`` > now): queued in the store, but
        # the policy does not see them before their time (as `sluice run` and the
        # simulator: a job arrives at ``arrival`` seconds after its submission).
        self._delayed: dict[int, JobRecord] = {}
        self._delayed_heap: list[tuple[float, int]] = []
        self._loaded = False
        self._inbox: list[JobRecord] = []
        self._inbox_lock = threading.Lock()
        store.on_queued = self._received
        # what GET /jobs shows of waiting jobs: the policy's dry run, once per slot
        self.last_slot_at: float | None = None
        self.queue_changes = 0        # bumped when the queue gains or loses a job
        self.waits = Waits(self)

    # ---- admission -------------------------------------------------------------------
    def validate(self, body: str, source: str) -> list[JobSpec]:
        """Parse and check a whole job file; InputError on the first problem."""
        if len(body) > LARGE_BODY:          # a large bad file must not bloat the service
            check_in_child(body, source, MAX_JOBS_PER_SUBMISSION)
        specs = parse_jobs_text(body, source, max_jobs=MAX_JOBS_PER_SUBMISSION)
        if len(specs) > MAX_JOBS_PER_SUBMISSION:
            raise InputError(source, f"at most {MAX_JOBS_PER_SUBMISSION} jobs per submission",
                             field="jobs")
        total = self.topology.total_gpus
        for spec in specs:
            if spec.max_gpus > total:
                raise RuleBroken(source, f"asks for {spec.max_gpus} GPUs but topology "
                                 f"'{self.topology.name}' has {total}; it could never run",
                                 element=f"job '{spec.name}'", field="max_gpus")
            if spec.num_ps > len(self.topology.hosts):
                raise RuleBroken(source, f"{spec.num_ps} parameter servers but only "
                                 f"{len(self.topology.hosts)} hosts",
                                 element=f"job '{spec.name}'", field="num_ps")
        return specs

    def submit(self, body: str, source: str, idempotency_key: str | None = None,
               user: str | None = None) -> SubmitResult:
        """Validate everything, then queue every job in ONE durable transaction. Returns
        only after the commit: the caller may acknowledge. ``user``: the Unix user the
        jobs run as (the caller's token's; None: the service's own account)."""
        specs = self.validate(body, source)
        now = self.clock()
        try:
            sub_id, job_ids = self.store.add_submission(source, body, specs, idempotency_key,
                                                        now=now, user=user)
        except DuplicateSubmission as dup:
            return SubmitResult(dup.submission_id, dup.job_ids, duplicate=True,
                                schedule=self._schedule_of(dup.job_ids))
        log.info("submission %d from %s: queued jobs %s", sub_id, source, job_ids)
        return SubmitResult(sub_id, job_ids, schedule=[
            {"id": j, "name": s.name, "arrival": s.arrival, "not_before": now + s.arrival}
            for j, s in zip(job_ids, specs)])

    def _schedule_of(self, job_ids: list[int]) -> list[dict]:
        out = []
        for j in job_ids:
            job = self.store.get(j)
            if job is not None:
                out.append({"id": j, "name": job.name, "arrival": job.spec.arrival,
                            "not_before": job.start_not_before})
        return out

    # ---- cancel ----------------------------------------------------------------------
    def cancel(self, job_id: int) -> JobRecord:
        with self.slot_lock:
            self.sync_queue()
            job = self.store.get(job_id)
            if job is None:
                raise NotFound(f"no job {job_id}")
            if job.state not in ("queued", "running"):
                raise Conflict(f"job {job_id} is already {job.state}")
            if job.state == "running":
                self.executors[job.executor].stop(job)
                self.policy.ended(job_id)
            changed = self.store.update(job_id, expect_state=job.state, state="cancelled",
                                        finished_at=self.clock(), reason="cancelled",
                                        event="cancelled", detail=f"while {job.state}")
            if changed and job.state == "running":
                self.tell_controller_ended(job)
            if not changed:
                raise Conflict(f"job {job_id} changed state while cancelling; retry")
            self._dequeue(job_id)
            log.info("job %d (%s) cancelled", job_id, job.name)
            return self.store.get(job_id)

    # ---- the queue in memory -----------------------------------------------------------
    def _received(self, jobs: list[JobRecord]) -> None:
        """The store committed a submission (called with the store locked: only append)."""
        with self._inbox_lock:
            self._inbox.extend(jobs)
            self.queue_changes += 1

    def sync_queue(self, now: float | None = None) -> None:
        """With ``slot_lock`` held: read the queue from the store once, then take in what
        was submitted since the last call; a job whose arrival lies ahead waits aside
        until its ``not_before`` (the policy does not see it before)."""
        now = self.clock() if now is None else now
        if not self._loaded:
            for job in self.store.jobs(["queued"]):    # O(queue), once per process
                self._admit(job, now)
            self._loaded = True
        with self._inbox_lock:
            arrived, self._inbox = self._inbox, []
        for job in arrived:                # committed before or after the read: same job
            if job.id not in self._queued and job.id not in self._delayed:
                self._admit(job, now)
        heap = self._delayed_heap
        while heap and heap[0][0] <= now:
            _, job_id = heapq.heappop(heap)
            job = self._delayed.pop(job_id, None)
            if job is not None:             # else cancelled while it waited
                self._enqueue(job)          # at the tail: the queue is in arrival order

    def _admit(self, job: JobRecord, now: float) -> None:
        if job.start_not_before > now:
            self._delayed[job.id] = job
            heapq.heappush(self._delayed_heap, (job.start_not_before, job.id))
        else:
            self._enqueue(job)

    def _enqueue(self, job: JobRecord, *, in_id_order: bool = False) -> None:
        self.queue_changes += 1
        self._queued[job.id] = job
        resume = job.resume or {}
        self.policy.add(QueuedJob(job.id, job.spec, job.start_not_before),
                        in_id_order=in_id_order, work_left=resume.get("work_left", 1.0),
                        restore_s=resume.get("restore_s", 0.0))

    def requeue_suspended(self, job: JobRecord, work_left: float) -> None:
        """A suspended job waits again (its record ``job``, stored): the policy learns
        its work left and the queue in memory holds the new record."""
        self.policy.suspended(job.id, work_left)
        self._queued[job.id] = job

    def waiting(self) -> tuple[dict[int, JobRecord], dict[int, JobRecord]]:
        """With ``slot_lock`` held: copies of the queue in memory and of the jobs whose
        arrival lies ahead."""
        return dict(self._queued), dict(self._delayed)

    def _dequeue(self, job_id: int) -> None:
        self.queue_changes += 1
        self._delayed.pop(job_id, None)
        self._queued.pop(job_id, None)
        self.policy.remove(job_id)

    # ---- the loop --------------------------------------------------------------------
    def cluster_state(self, running: Sequence[JobRecord]) -> ClusterState:
        """Free GPUs = topology minus the recorded placements (and GPU indices) of
        running jobs; one whose record is bad holds nothing (``_reap`` fails it)."""
        return self.held_state(running)[0]

    def held_state(self, running: Sequence[JobRecord]) -> tuple[ClusterState, dict[int, str]]:
        """:meth:`cluster_state`, and the running jobs whose record is bad (holding
        nothing)."""
        state, problems = held_state(self.topology, running, self._capacities)
        if self.capacity is not None:
            self.capacity(state, running)
        return state, problems

    def tick(self) -> dict[str, int]:
        """One slot: reap ended jobs, then let the policy start queued ones."""
        with self.slot_lock:
            now = self.clock()
            self.sync_queue(now)
            ended = self._reap(now)
            started = self._schedule(now)
            self._retry_registrations(now)
            self.ticks += 1
            self.last_slot_at = now
            return {"ended": ended, "started": started}

    def check_running_fit(self) -> None:
        """The running jobs' recorded hosts must be this topology's (a restart with another
        --topology is refused); a record that cannot be held otherwise (an index its host
        lacks, GPUs another job's record holds) fails that job alone at the first slot."""
        running = self.store.jobs(["running"])
        hosts = self.topology.host_by_name
        for job in running:
            for host in job.gpus_by_host():
                if host not in hosts:
                    raise option_error("topology", f"job {job.id} ({job.name}) is running on "
                                     f"host '{host}', which topology '{self.topology.name}' "
                                     "does not have; start with the topology it was "
                                     "scheduled on")

    def recover(self) -> dict[str, int]:
        """At start-up: reconcile the jobs a previous run left 'running'."""
        with self.slot_lock:
            self.sync_queue()
            before = {j.id for j in self.store.jobs(["running"])}
            self._reap(self.clock())
            self._resume_registrations()
            after = {j.id: j for j in self.store.jobs()}
        summary = {"running_before": len(before),
                   "still_running": sum(after[i].state == "running" for i in before),
                   "finished": sum(after[i].state == "finished" for i in before),
                   "failed": sum(after[i].state == "failed" for i in before),
                   "requeued": sum(after[i].state == "queued" for i in before),
                   "queued": sum(j.state == "queued" for j in after.values())}
        log.info("recovered: %s", summary)
        return summary

    def _reap(self, now: float) -> int:
        """Poll every running job; record all that ended in ONE transaction."""
        ended: list[tuple[JobRecord, Outcome]] = []
        running = self.store.jobs(["running"])
        for executor in self.executors.values():   # one batched look per executor (Slurm)
            if hasattr(executor, "prepare_poll"):
                executor.prepare_poll(running, now)
        _, problems = held_state(self.topology, running, self._capacities)
        for job in running:
            executor = self.executors.get(job.executor)
            problem = problems.get(job.id)
            if executor is None:
                outcome = Outcome("failed", now, None, f"unknown executor {job.executor!r}")
            elif problem is not None:       # bad input: this job fails, nothing else
                log.error("job %d (%s): %s", job.id, job.name, problem)
                executor.stop(job)
                outcome = Outcome("failed", now, None, problem)
            else:
                outcome = executor.poll(job, now)
                learned = executor.learned(job)
                if learned:
                    event, detail = suspending.restart_event(job, learned) or (None, None)
                    self.store.update(job.id, expect_state="running", event=event,
                                      detail=detail, **learned)
            if outcome is not None:
                ended.append((job, outcome))
        changed = self.store.update_many([self._end_update(j, o) for j, o in ended])
        for (job, outcome), ok in zip(ended, changed):
            if ok:
                self.policy.ended(job.id)
                self._ended(job, outcome)
            self.tell_controller_ended(job)
        return len(ended)

    def _end_update(self, job: JobRecord, outcome: Outcome) -> JobUpdate:
        if outcome.never_started:
            return JobUpdate(job.id, {**_REQUEUED, "attempts": max(0, job.attempts - 1)},
                             "running", "requeued", outcome.reason)
        if outcome.state == "suspended":      # the resource manager preempted it
            resume = self._resume_of(job, outcome)
            return JobUpdate(job.id, {**_REQUEUED, "resume": resume,
                                      "attempts": max(0, job.attempts - 1)},
                             "running", "suspended", suspending.suspend_detail(job, resume))
        if self._retries(job, outcome):
            # Back to the queue with no GPUs: the next slot may place it anywhere.
            return JobUpdate(job.id, {**_REQUEUED, "exit_code": outcome.exit_code,
                                      "reason": outcome.reason}, "running", "retry",
                             f"attempt {job.attempts} failed: {outcome.reason}; retrying "
                             f"({job.attempts}/{self.max_retries})")
        return JobUpdate(job.id, dict(state=outcome.state, finished_at=outcome.finished_at,
                                      exit_code=outcome.exit_code, reason=outcome.reason),
                         "running", outcome.state, outcome.reason)

    def _resume_of(self, job: JobRecord, outcome: Outcome) -> dict:
        return suspending.resume_after(job, outcome.resume or {}, 0.0,
                                       outcome.reason or "preempted", outcome.finished_at)

    def _retries(self, job: JobRecord, outcome: Outcome) -> bool:
        return outcome.state == "failed" and job.attempts <= self.max_retries

    def _ended(self, job: JobRecord, outcome: Outcome) -> None:
        """After the store recorded ``_end_update``: log it; a re-queued job goes back
        to its place in the queue (FIFO by first submission)."""
        if outcome.never_started:
            log.warning("job %d (%s) %s; re-queued", job.id, job.name, outcome.reason)
            attempts = max(0, job.attempts - 1)
        elif outcome.state == "suspended":
            log.warning("job %d (%s) suspended (%s); re-queued to resume", job.id, job.name,
                        outcome.reason)
            job = dataclasses.replace(job, resume=self._resume_of(job, outcome))
            attempts = max(0, job.attempts - 1)
        elif self._retries(job, outcome):
            log.warning("job %d (%s) failed (%s); retry %d/%d", job.id, job.name,
                        outcome.reason, job.attempts, self.max_retries)
            attempts = job.attempts
        else:
            level = logging.WARNING if outcome.state == "failed" else logging.INFO
            log.log(level, "job %d (%s) %s%s", job.id, job.name, outcome.state,
                    f": {outcome.reason}" if outcome.reason else "")
            return
        self._enqueue(dataclasses.replace(job, **_REQUEUED, attempts=attempts), in_id_order=True)

    def _schedule(self, now: float) -> int:
        running = self.store.jobs(["running"])
        state = self.cluster_state(running)
        progress = suspending.measured_progress(self, running)    # real jobs' work left
        decisions = self.policy.decide(state.copy(), now, **progress)   # O(started)
        executor = self.executors[self.executor]
        planned: list[tuple[JobRecord, StartDecision, dict]] = []
        updates: list[JobUpdate] = []
        for decision in decisions:
            if isinstance(decision, Suspend):     # before the starts that take its GPUs
                self._suspend(decision, state, now)
                continue
            job = self._queued.get(decision.job_id)
            if job is None:
                log.error("policy chose job %s which is not queued; ignored", decision.job_id)
                continue
            try:   # never over-commit a host, never hand out a GPU index twice
                decision = dataclasses.replace(decision, gpu_ids=state.allocate(
                    decision.placement, decision.gpu_ids))
            except ValueError as err:
                log.error("policy over-committed for job %d: %s; ignored", job.id, err)
                self._enqueue(job, in_id_order=True)    # still queued: decided again later
                continue
            try:
                fields = executor.plan(job, decision, now)
            except Exception as err:  # a job we cannot even plan fails; the service goes on
                log.error("job %d (%s) could not start: %s", job.id, job.name, err)
                updates.append(JobUpdate(job.id, dict(state="failed", finished_at=now,
                                                      reason=f"could not start: {err}"),
                                         "queued", "failed", f"could not start: {err}"))
                continue
            fields = dict(state="running", gpus=decision.gpus,
                          placement=decision.placement_record(), attempts=job.attempts + 1,
                          reason=None, exit_code=None, **fields)
            planned.append((job, decision, fields))
            updates.append(JobUpdate(
                job.id, fields, "queued", suspending.start_event(job, now),
                f"{decision.gpus} GPUs on {decision.gpus_by_host()} GPU indices "
                f"{decision.gpu_ids.as_dict() if decision.gpu_ids else None}"
                + (f" from {job.resume['checkpoint']}" if (job.resume or {}).get("checkpoint")
                   else "")))
        # Every start of the slot is recorded as running (with its GPUs) in one
        # transaction BEFORE anything is launched: if we die right after a launch, the
        # restarted service finds the job and reconciles it.
        changed = self.store.update_many(updates)
        for u in updates:
            self._dequeue(u.job_id)        # failed, running, or no longer queued anyway
        applied = {u.job_id for u, ok in zip(updates, changed) if ok}
        # a start whose guard failed is not ours to launch
        return sum(self._launch(executor, dataclasses.replace(job, **fields), decision)
                   for job, decision, fields in planned if job.id in applied)

    def _suspend(self, step: Suspend, state: ClusterState, now: float) -> None:
        suspending.carry_out(self, step, state, now, _REQUEUED)

    def _launch(self, executor: Executor, record: JobRecord, decision: StartDecision) -> int:
        env = self._tell_controller_started(record, getattr(executor, "port_block", None))
        try:
            launched = executor.launch(record, env)
        except Exception as err:
            self.store.update(record.id, expect_state="running", state="failed",
                              finished_at=self.clock(), reason=f"launch failed: {err}",
                              event="failed", detail=f"launch failed: {err}")
            log.error("job %d (%s) launch failed: %s", record.id, record.name, err)
            self.tell_controller_ended(record)
            return 0
        if launched:        # the local executor's pid: recorded as soon as it exists
            self.store.update(record.id, **launched)
        log.info("job %d (%s) started on %d GPUs %s", record.id, record.name, decision.gpus,
                 decision.gpus_by_host())
        return 1

    def _tell_controller_started(self, job: JobRecord,
                                 port_block: Callable[[JobRecord], int] | None = None
                                 ) -> dict[str, str]:
        """Register the job's endpoints (the ports of the block its executor reserves,
        ``port_block``) before its processes start, so its first packets are already
        classified; returns env for the job (its identity at the controller, its
        progress token). The job is
        registered under its own identity, unique per submission, never its name alone
        (``controller_link.controller_job_id``). A failure does not stop the job: it is
        recorded on the job (``controller`` of its view, an event) and retried until it
        succeeds or the job ends (``_retry_registrations``)."""
        if self.controller is None:
            return {}
        self.registrations.drop(job.id)       # a new start: its own registration
        try:
            env = dict(self.controller.job_started(
                job, port_block(job) if port_block else None) or {})
        except Exception as err:   # the controller being down must not stop jobs
            self._registration_failed(job, err)
            return {}
        self.store.update(job.id, event=ctl.REGISTERED_EVENT,
                          detail=ctl.registered_detail(job))
        return env

    def _registration_failed(self, job: JobRecord, err: Exception) -> None:
        retried = getattr(err, "retry", True)
        attempts, new = self.registrations.failed(job.id, self.clock(), str(err))
        if not retried:
            self.registrations.drop(job.id)
        if new or not retried:     # each change is an event; a repeat only counts
            log.warning("controller: could not register job %d (%s), attempt %d%s: %s",
                        job.id, job.name, attempts, "; retrying" if retried else "", err)
            self.store.update(job.id, event=ctl.ERROR_EVENT,
                              detail=(ctl.RETRIED if retried else ctl.NOT_RETRIED) + str(err))

    def _retry_registrations(self, now: float) -> None:
        """Register again each running job whose registration failed, when its delay is
        up; a job that ended meanwhile is dropped (its end removed nothing: there was
        nothing there)."""
        for job_id in self.registrations.due(now):
            job = self.store.get(job_id)
            if job is None or job.state != "running":
                self.registrations.drop(job_id)
                continue
            executor = self.executors.get(job.executor)
            held = getattr(executor, "held_port_block", None)
            try:
                self.controller.job_started(job, held(job) if held else None)
            except Exception as err:
                self._registration_failed(job, err)
                continue
            attempt = (self.registrations.attempts(job_id) or 0) + 1
            self.registrations.drop(job_id)
            self.store.update(job_id, event=ctl.REGISTERED_EVENT,
                              detail=ctl.registered_detail(job, attempt))
            log.info("controller: job %d (%s) registered as %s at attempt %d", job_id,
                     job.name, ctl.controller_job_id(job), attempt)

    def _resume_registrations(self) -> None:
        """At start-up: the running jobs a previous run left unregistered are retried."""
        if self.controller is None:
            return
        now = self.clock()
        for job in self.store.jobs(["running"]):
            view = ctl.registration_view(self.store.events(job.id), True)
            if view and view["state"] == ctl.PENDING:
                self.registrations.resume(job.id, view["attempts"], view["error"], now)

    def controller_view(self, job: JobRecord) -> dict | None:
        """The job's registration at the controller (``controller`` of ``GET
        /jobs/{id}``): None without a controller, or for a job never started."""
        if self.controller is None:
            return None
        return ctl.registration_view(self.store.events(job.id), job.state == "running",
                                     self.registrations.attempts(job.id))

    def tell_controller_ended(self, job: JobRecord) -> None:
        """The job's GPUs went free (it ended, or was suspended): the controller drops
        its flows; a failure to reach it is logged and recorded, never raised."""
        if self.controller is None:
            return
        if job.id in self.registrations:      # never registered: nothing to remove
            self.registrations.drop(job.id)
            return
        try:
            self.controller.job_ended(job)
        except Exception as err:
            log.warning("controller: could not remove job %d's flows: %s", job.id, err)
            self.store.update(job.id, event="controller-error", detail=f"remove: {err}")

    def run(self, slot: float, stop: threading.Event) -> None:
        """Tick every ``slot`` seconds until ``stop`` is set. A failing tick is logged
        and retried next slot (the store is the truth; nothing is half-applied)."""
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.tick()
            except Exception:
                log.exception("scheduling slot failed; retrying next slot")
            stop.wait(max(0.0, slot - (time.monotonic() - started)))

    # ---- views -----------------------------------------------------------------------
    def health(self) -> dict:
        running = self.store.jobs(["running"])
        state = self.cluster_state(running)
        return {"ok": True, "topology": self.topology.name, "executor": self.executor,
                "counts": self.store.counts(), "total_gpus": state.total_gpus,
                "free_gpus": state.total_free, "ticks": self.ticks}
