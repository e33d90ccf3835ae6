"""Why a queued job waits, where it stands and when it should start: the policy's own
dry run of the current queue (``sluice jobs``, ``GET /jobs``).

:func:`dry_run` takes a copy of the service's policy step (:func:`clone_step`: the
policy object and its picture of the jobs, Lyapunov's Q and Z included) and the free
GPUs, and drives it slot after slot with the same calls the service makes
(``PolicyStep.decide``, which runs ``decisions.decide_slot``, the simulator's loop
body): a running job ends at its estimated end (the simulated executor's
``expected_end``; else its start plus the C(n) the policy predicted for it), a job the
dry run starts runs for what its executor would give it (``run_seconds``), a job
whose ``arrival`` lies ahead enters the queue at its ``not_before``. Like the
simulator it skips to the next event when the policy does not want every slot.

Bounded: the dry run looks at the first ``max_jobs`` waiting jobs (in the queue's
order; the others keep their place after them, with no estimate) and decides at most
``max_slots`` slots in at most ``max_seconds`` of wall clock; a job it has not started
by then has ``estimated_start`` None ("beyond the forecast"). A job that would wait on a running job with no estimated end
(a real job whose C(n) is unknown) gets no estimate either.

:func:`wait_reason` turns a job's place into a stable ``code`` and a sentence
(``REASON_CODES``). Pure: the service (``scheduler.SchedulerService.forecast``) gathers
the inputs under its lock and caches one forecast per slot.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from job_scheduler.core.decisions import QueuedJob, StartDecision, Suspend
from sluice_common.placement import Placement
from job_scheduler.core.cluster_state import ClusterState

# every reason a job may wait, in the order /metrics lists them
SLURM_PENDING = "slurm"   # Slurm's own pending reason (squeue), not the executor's name
REASON_CODES = ("gpus", "behind", "arrival", "policy", "suspended", SLURM_PENDING)
MAX_SLOTS = 4096        # slots one dry run decides at most
MAX_JOBS = 500          # waiting jobs one dry run looks at
MAX_SECONDS = 0.5       # wall-clock seconds one dry run may take (a loaded host, a big queue)


@dataclass
class Arrival:
    """A job the dry run queues at ``at`` (a future ``arrival``), or at once."""
    job: QueuedJob
    at: float
    work_left: float = 1.0
    restore_s: float = 0.0


@dataclass
class Held:
    """A running job's GPUs and when they are expected back (None: not known)."""
    placement: Placement       # named str(job id), as the service's cluster state
    end: float | None
    started: float | None = None


@dataclass
class Forecast:
    """One dry run: ``starts`` (job -> estimated start, Unix s), ``ends`` (running job
    -> estimated end), ``order`` (every waiting job, in the order the dry run starts
    them, the ones with no estimate last in queue order), ``explain`` (the head job's
    policy explanation when the policy chose to wait with GPUs free), and what the
    cluster had free when it was taken."""
    at: float
    slot: float
    order: list[int] = field(default_factory=list)
    starts: dict[int, float] = field(default_factory=dict)
    ends: dict[int, float] = field(default_factory=dict)
    needs: dict[int, int] = field(default_factory=dict)
    free: int = 0
    total: int = 0
    policy: str = "?"
    explain: dict[int, str] = field(default_factory=dict)
    slots: int = 0               # slots the dry run decided
    truncated: bool = False      # it stopped at max_slots or max_jobs

    def position(self, job_id: int) -> int | None:
        return self._positions().get(job_id)

    def _positions(self) -> dict[int, int]:
        cached = getattr(self, "_pos", None)
        if cached is None or len(cached) != len(self.order):
            cached = {j: i + 1 for i, j in enumerate(self.order)}
            self._pos = cached
        return cached


def clone_step(step):
    """A copy of the service's policy step the dry run may drive: everything the policy
    decides from is copied; the topology, the estimator and each job's spec and model
    are shared (never changed after they are made) and the policy's histories for
    plots (deques) start empty."""
    view = step.view
    memo = {id(view.topology): view.topology, id(view.estimator): view.estimator}
    for shared in (view.jobs, view.models):    # a JobSpec, a JobModel: never changed
        for value in shared.values():
            memo[id(value)] = value
    for obj in (step.policy, view):
        for value in vars(obj).values():
            if isinstance(value, deque):
                memo[id(value)] = deque(maxlen=value.maxlen)
    return copy.deepcopy(step, memo)


def _named(placement: Placement, job_id: int) -> Placement:
    return dataclasses.replace(placement, job=str(job_id))


def dry_run(step, state: ClusterState, at: float, held: dict[int, Held],
            arrivals: Iterable[Arrival],
            run_seconds: Callable[[int, StartDecision, float, float, float], float | None],
            *, max_slots: int = MAX_SLOTS, max_jobs: int = MAX_JOBS,
            max_seconds: float = MAX_SECONDS, queue: list[int] | None = None) -> Forecast:
    """The policy's own schedule of the waiting jobs from the slot after ``at``.

    ``step``: a :func:`clone_step` copy (driven, so changed); ``state``: the free GPUs
    now (changed too); ``held``: the running jobs; ``arrivals``: the jobs not yet shown
    to the policy (arriving later, or submitted since the last slot); ``queue``: the
    waiting jobs in the service's order (the policy's waiting list, then ``arrivals``).
    ``run_seconds(job, decision, t, work_left, restore_s)``: seconds a job started at
    ``t`` runs (None: the policy's predicted C(n) times its work left, plus the
    restore)."""
    run = _DryRun(step, state, at, held, arrivals, run_seconds, max_jobs, queue)
    return run.forecast(max_slots, max_seconds)


class _DryRun:
    """One dry run's state: the policy step it drives, the free GPUs, the jobs it holds
    running and the ones still to arrive, and the forecast it fills."""

    def __init__(self, step, state: ClusterState, at: float, held: dict[int, Held],
                 arrivals: Iterable[Arrival], run_seconds, max_jobs: int,
                 queue: list[int] | None):
        self.step, self.state, self.at, self.run_seconds = step, state, at, run_seconds
        view = step.view
        self.fc = Forecast(at=at, slot=step.slot, free=state.total_free,
                           total=state.total_gpus, policy=step.name)
        pending = sorted(arrivals, key=lambda a: (a.at, a.job.id))
        waiting_now = list(view.waiting)
        self.queue = queue if queue is not None else waiting_now + [a.job.id for a in pending]
        self.watched = set(self.queue[:max_jobs])
        self.fc.truncated = len(self.queue) > max_jobs
        # a waiting job beyond the cap stays out of the dry run (the policy's work counts
        # stay as the service's: Q still holds them)
        for j in waiting_now:
            if j not in self.watched:
                view.waiting.pop(j, None)
        self.pending = [a for a in pending if a.job.id in self.watched]
        self.held = dict(held)
        for j, h in self.held.items():
            if h.end is not None:
                self.fc.ends[j] = h.end
        for j in self.queue:
            self.fc.needs[j] = _needs(step, j)
        _explain_head(step, state, self.fc)
        self.left: dict[int, tuple[float, float]] = {}   # suspended here: work, restore

    def forecast(self, max_slots: int, max_seconds: float) -> Forecast:
        fc, step = self.fc, self.step
        t, k = self.at, 0
        deadline = time.monotonic() + max_seconds
        while k < max_slots and self.watched - set(fc.starts):
            if k and time.monotonic() > deadline:
                fc.truncated = True
                break
            t_next = self._next_slot(t, first=not k)
            if t_next is None:
                break                          # nothing will ever change: no estimate
            t, k = t_next, k + 1
            for j in [j for j, h in self.held.items() if h.end is not None and h.end <= t]:
                self.state.release(self.held.pop(j).placement)
                step.ended(j)
            while self.pending and self.pending[0].at <= t:
                a = self.pending.pop(0)
                step.add(a.job, in_id_order=False, work_left=a.work_left,
                         restore_s=a.restore_s)
            for d in step.decide(self.state.copy(), t):
                if isinstance(d, Suspend):
                    self._suspend(d, t)
                else:
                    self._start(d, t)
        fc.slots = k
        fc.truncated = fc.truncated or bool(self.watched - set(fc.starts)) and k >= max_slots
        rank = {j: i for i, j in enumerate(self.queue)}
        fc.order = sorted(self.queue, key=lambda j: (fc.starts.get(j, math.inf), rank[j]))
        for j in list(fc.ends):            # only the running jobs' ends are shown
            if j in rank:
                del fc.ends[j]
        return fc

    def _next_slot(self, t: float, first: bool) -> float | None:
        """The next slot the policy decides in (as the simulator: straight to the next
        event when the policy does not want every slot); None when no event will come."""
        step, view = self.step, self.step.view
        t_next = t + step.slot
        idle = not view.waiting and not step.has_arrivals
        if not idle and step.policy.wants_slot(view):
            return t_next
        events = [h.end for h in self.held.values() if h.end is not None]
        events += [a.at for a in self.pending]
        events.append(step.policy.next_wakeup(view))
        t_event = min(events)
        if math.isinf(t_event):
            if idle or not first or not step.has_arrivals:
                return None
        else:
            t_next = max(t_next, self.at + math.ceil((t_event - self.at) / step.slot - 1e-9)
                         * step.slot)
        skipped = int(round((t_next - t) / step.slot)) - 1
        if idle and skipped > 0:
            step.policy.idle(view, skipped)
        return t_next

    def _suspend(self, d: Suspend, t: float) -> None:
        h = self.held.pop(d.job_id, None)
        if h is None:
            return
        self.state.release(h.placement)
        self.fc.ends.pop(d.job_id, None)
        run = (h.end - h.started) if h.end is not None and h.started else None
        frac = (max(h.end - t, 0.0) / run) if run else 1.0
        self.left[d.job_id] = (frac, d.cost_s)

    def _start(self, d: StartDecision, t: float) -> None:
        p = _named(d.placement, d.job_id)
        self.state.allocate(p, d.gpu_ids)
        work, restore = self.left.pop(d.job_id, (None, None))
        secs = self.run_seconds(d.job_id, d, t, work, restore)
        if secs is None:
            secs = _predicted(self.step, d, p, 1.0 if work is None else work, restore or 0.0)
        end = None if secs is None else t + secs
        self.held[d.job_id] = Held(p, end, t)
        if end is not None:
            self.fc.ends.setdefault(d.job_id, end)
        if d.job_id in self.watched:
            self.fc.starts.setdefault(d.job_id, t)


def _needs(step, j: int) -> int:
    """GPUs job j needs to start under the policy (fixed-count policies: its count;
    the others: at least 1)."""
    try:
        return int(step.policy.needs(step.view, j))
    except (KeyError, AttributeError, TypeError):
        spec = step.view.jobs.get(j)
        return int(getattr(spec, "trace_gpus", 0) or getattr(spec, "max_gpus", 1) or 1)


def _predicted(step, d: StartDecision, p: Placement, work: float, restore: float):
    model = step.view.models.get(d.job_id)
    if model is None:
        return None
    bw = step.view.live_bandwidth(p)
    return restore + work * model.C(p.gpus, bw, step.view.exchange_path(p))


def _explain_head(step, state: ClusterState, fc: Forecast) -> None:
    """When the head job could start on the free GPUs and the policy waited: which of
    its terms decided (Lyapunov: V*C(n) against the queues Q and Z)."""
    view, policy = step.view, step.policy
    head = next(iter(view.waiting), None)
    if head is None or state.total_free == 0:
        return
    queues = getattr(policy, "queues", None)
    if queues is None or not hasattr(policy, "V"):
        return
    from job_scheduler.core import proteus
    from job_scheduler.core.policies.base import candidate_costs
    saved = view.state
    view.state = state.copy()
    try:
        job, model = view.jobs[head], view.models[head]
        limit = min(job.max_gpus, state.total_free)
        costs, _ = candidate_costs(view, head, limit, policy.placer, place_one=False)
    finally:
        view.state = saved
    if not costs:
        return
    cost1 = model.cost1
    served = {n: proteus.served_work(n, cost1, policy.k) for n in costs}
    n = min(costs, key=lambda n: (proteus.S(n, costs[n], served[n], queues.Q, queues.Z,
                                             policy.V), n))
    kc = served[n]
    penalty = policy.V * costs[n] + kc * kc
    backlog = kc * (queues.Q + queues.Z)
    needed = penalty / kc if kc else math.inf
    slots = math.ceil(max(needed - queues.Q - queues.Z, 0.0) / policy.eps) \
        if policy.eps > 0 else None
    fc.explain[head] = (
        f"the lyapunov policy waits: its best count n={n} has a predicted C({n}) = "
        f"{costs[n]:.3g} s, and V*C(n) + (k*Cost(1))^2 = {penalty:.3g} outweighs the "
        f"queue term k*Cost(1)*(Q+Z) = {backlog:.3g} (Q = {queues.Q:.0f} s queued work, "
        f"Z = {queues.Z:.0f}); it starts once Q+Z reaches {needed:.0f}"
        + (f", about {slots} slot(s) of Z growing by eps = {policy.eps:g}"
           if slots is not None else ""))


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(t))


def _gpus(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def wait_reason(job, fc: Forecast | None, now: float) -> dict:
    """``{"code", "message"}`` for a queued job ``job`` (a JobRecord) given the
    forecast (None: none was taken yet). Precedence: a future ``arrival``, a
    suspension, jobs ahead of it (``behind``), too few free GPUs for the head
    (``gpus``), else the policy's own choice (``policy``)."""
    resume = job.resume or {}
    pos = fc.position(job.id) if fc is not None else None
    start = fc.starts.get(job.id) if fc is not None else None
    when = (f"; estimated start {_clock(start)} (in {max(start - now, 0):.0f} s)"
            if start is not None else
            "; no estimated start within the forecast" if fc is not None else "")
    earlier = f"; last attempt: {job.reason}" if job.reason else ""
    if job.start_not_before > now:
        return {"code": "arrival",
                "message": f"arrives at {_clock(job.start_not_before)} (in "
                           f"{job.start_not_before - now:.0f} s): its arrival is "
                           f"{job.spec.arrival:g} s after the submission{when}"}
    if resume.get("suspends"):
        why = resume.get("why") or "preempted"
        at = resume.get("suspended_at")
        return {"code": "suspended",
                "message": f"suspended{' at ' + _clock(at) if at else ''} ({why}) with "
                           f"{float(resume.get('work_left', 1.0)):.2f} of its work left; "
                           f"waits to resume"
                           + (f" at position {pos}" if pos else "") + when}
    if fc is None:
        return {"code": "behind", "message": "queued; not yet seen by a scheduling slot"}
    need, free, total = fc.needs.get(job.id, 1), fc.free, fc.total
    ahead = (pos - 1) if pos else 0
    if ahead > 0:
        return {"code": "behind",
                "message": f"behind {ahead} job{'s' if ahead != 1 else ''} in the "
                           f"{fc.policy} policy's order (needs {_gpus(need)}, {free} "
                           f"of {total} free){when}{earlier}"}
    if need > free:
        return {"code": "gpus",
                "message": f"waiting for {_gpus(need)}: {free} of {total} free{when}"
                           f"{earlier}"}
    explained = fc.explain.get(job.id)
    return {"code": "policy",
            "message": (explained or f"the {fc.policy} policy chose not to start it with "
                        f"{free} of {total} GPUs free") + when + earlier}


PENDING_PREFIX = "pending in Slurm"


def slurm_pending(reason: str | None) -> str | None:
    """Slurm's own pending reason(s) (``Resources``, ``Priority``,
    ``QOSMaxGRESPerUser``...) from the reason the Slurm executor records for a job
    Slurm keeps PENDING (``"pending in Slurm (Resources)"``); None for any other text."""
    if not reason or not reason.startswith(PENDING_PREFIX):
        return None
    inner = reason[len(PENDING_PREFIX):]
    a, b = inner.find("("), inner.find(")")
    if a < 0 or b < a:
        return None
    return inner[a + 1:b].strip() or None


def slurm_reason(job) -> dict | None:
    """The ``slurm`` reason of a job sluice started that Slurm keeps PENDING."""
    why = slurm_pending(job.reason)
    if why is None:
        return None
    ext = f"Slurm job {job.external_id}" if job.external_id else "its Slurm job"
    return {"code": "slurm",
            "message": f"queued in Slurm: {ext} is PENDING, Slurm's reason: {why}"}
