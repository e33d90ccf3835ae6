"""The scheduling loop: admit, decide, place, execute, advance, on a clock, through an
executor (the shape of Blox's loop).

One turn of :class:`SchedulingLoop`:

- *execute* (what happened): the executor's progress of every launched job (the view's
  ``done``; the first time all its workers have trained, its segment starts: the
  policy's ``on_training``, the mechanisms' ``on_start``), then the jobs whose
  processes ended (``poll``): a finished (or failed) job gives its GPUs back and leaves
  the policy's picture, a suspended one gives them back and waits again; after ends the
  mechanisms' ``after_complete`` may move jobs onto the freed GPUs (migration);
- *place*: the planned starts whose GPUs are free now are launched, in plan order (a
  start waits for a job still stopping on its GPUs; a packed guest shares its
  partner's GPU);
- *admit* and *decide*, at each slot of the grid (k x slot): the jobs the
  :class:`Admission` lets in by the slot join the queue (``on_arrival``; a
  :class:`TraceAdmission`: those whose ``arrival`` is at or before it), ``decisions.decide_slot``
  runs on the view with the policy and mechanisms, and the plan is carried out: a
  ``Suspend`` asks the executor to stop the job (at a batch boundary: its GPUs are
  promised to the plan's next starts at once, held until it has stopped), a
  ``StartDecision`` is placed as above;
- *advance*: the clock waits until the next slot or the executor's next news.

What differs between loops is only the pieces: the :class:`Clock` (a :class:`VirtualClock`
jumps, a :class:`WallClock` sleeps), the :class:`Executor` (real PS jobs on a fabric, a
model that times them), the :class:`Admission` and the policy (whose placement answers
the jobs to stop and to launch, a ``SlotPlan``): same pieces and job timings, the same
decisions.
The view (``live_view.LiveView``) is the policy's picture; the loop keeps the GPUs the
launched jobs hold (``state``), the starts not launched yet (``deferred``), the
suspensions in flight (``asked``) and the packed pairs. Pure: the executor does the I/O.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Callable, Protocol, Sequence

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.decisions import SlotPlan, StartDecision, Suspend, decide_slot
from job_scheduler.core.mechanisms import leave_pair
from sluice_common.jobspec import JobSpec


class Clock(Protocol):
    def start(self) -> None:
        """The loop begins: time 0."""

    def now(self) -> float:
        """Seconds since ``start``."""

    def wait_until(self, t: float) -> None:
        """Advance to ``t`` (at once where it is past)."""


class VirtualClock:
    """Time that jumps to where it is asked (never back)."""

    def __init__(self):
        self.t = 0.0

    def start(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def wait_until(self, t: float) -> None:
        if math.isinf(t):
            raise RuntimeError("the loop waits for nothing: no slot and no news ahead")
        self.t = max(self.t, t)


class WallClock:
    """Monotonic seconds since ``start``; a wait sleeps."""

    def __init__(self):
        self.t0 = time.monotonic()

    def start(self) -> None:
        self.t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def wait_until(self, t: float) -> None:
        left = t - self.now()
        if left > 0:
            time.sleep(left)


@dataclass(frozen=True)
class Ended:
    """Job ``job_id``'s processes have exited: ``suspended`` (stopped with its progress
    kept, it waits again) or not (it finished, or failed)."""
    job_id: int
    suspended: bool = False


@dataclass(frozen=True)
class Progress:
    """A launched job's work ``done`` (fraction, its slowest worker's) and when its
    segment's training began (``training_since``: every worker has trained a batch)."""
    done: float
    training_since: float


class Executor(Protocol):
    """What carries the loop's decisions out and reports back."""

    def admit(self, j: int, spec: JobSpec) -> None:
        """Job ``j`` joined the queue."""

    def observe(self, view, now: float) -> None:
        """Before a decision: bring the view's picture up to date (its bandwidth)."""

    def launch(self, d: StartDecision, packed_with: int | None) -> None:
        """Start (or resume) job ``d.job_id`` on ``d.placement`` and ``d.gpu_ids``; a
        packed guest shares ``packed_with``'s GPU."""

    def suspend(self, j: int, why: str) -> None:
        """Ask launched job ``j`` to stop, keeping its progress."""

    def progress(self, j: int, now: float) -> Progress | None:
        """Launched job ``j``'s progress (None: not every worker has trained yet)."""

    def training(self, j: int) -> None:
        """Job ``j``'s segment has begun training (the loop saw it in ``progress``)."""

    def poll(self, now: float) -> list[Ended]:
        """The launched jobs whose processes have ended since the last poll."""

    def ended(self, e: Ended) -> None:
        """After the loop took back its GPUs: the executor's books of the end."""

    def turn(self, loop: "SchedulingLoop", now: float, slotted: bool) -> None:
        """Once per turn, at its end (``slotted``: a slot was decided in it)."""

    def next_event(self, now: float) -> float:
        """When the executor may next have news (``math.inf``: none of its own)."""


class Admission(Protocol):
    """Which jobs join the queue at a slot."""

    @property
    def pending(self) -> Sequence[JobSpec]:
        """The jobs still to come (in the order they will be let in)."""

    def due(self, tick: float) -> list[JobSpec]:
        """The jobs let in at slot ``tick``, taken out of ``pending``."""


class TraceAdmission:
    """A known list of jobs, each let in at the first slot at or after its ``arrival``
    (by arrival, then name)."""

    def __init__(self, jobs: Sequence[JobSpec]):
        self._pending = deque(sorted(jobs, key=lambda j: (j.arrival, j.name)))

    @property
    def pending(self) -> Sequence[JobSpec]:
        return self._pending

    def due(self, tick: float) -> list[JobSpec]:
        out = []
        while self._pending and self._pending[0].arrival <= tick + 1e-9:
            out.append(self._pending.popleft())
        return out


class SchedulingLoop:
    """One scheduling loop: the jobs ``admission`` lets in, decided by ``policy`` on
    ``view`` (a ``live_view.LiveView``), carried out by ``executor``, timed by ``clock``;
    a job's key is its rank of admission. ``on_plan(t, plan)``: each plan as it is
    carried out."""

    def __init__(self, admission: Admission, policy, view, executor: Executor,
                 clock: Clock, *, mechanisms: Sequence = (), state: ClusterState | None = None,
                 on_plan: Callable[[float, SlotPlan], None] | None = None):
        self.admission = admission
        self.specs: dict[int, JobSpec] = {}         # admitted, by key
        self.policy, self.view, self.executor, self.clock = policy, view, executor, clock
        self.mechanisms = tuple(mechanisms)
        self.slot = float(view.slot)
        # GPUs held by launched jobs (a packed guest holds none of its own)
        self.state = state if state is not None else ClusterState(view.topology)
        self.on_plan = on_plan
        self.launched: dict[int, StartDecision] = {}
        self.deferred: list[StartDecision] = []     # planned starts waiting for their GPUs
        self.asked: dict[int, str] = {}             # suspensions in flight: job -> why
        self.partner: dict[int, int] = {}           # launched packed jobs, both ways
        self.guests: set[int] = set()               # the packed job with no GPU of its own
        self.next_slot = 0.0

    @property
    def busy(self) -> bool:
        return bool(self.admission.pending or self.view.waiting or self.launched
                    or self.deferred)

    def name(self, j: int) -> str:
        return self.specs[j].name

    def run(self) -> None:
        """Turns until every job has arrived, run and ended."""
        self.clock.start()
        while self.busy:
            self.turn()
            if self.busy:
                now = self.clock.now()
                self.clock.wait_until(min(self.next_slot, self.executor.next_event(now)))

    def turn(self) -> None:
        now = self.clock.now()
        for j in list(self.launched):
            self._progress(j, now)
        ended = self.executor.poll(now)
        for e in ended:
            self.end(e)
        if ended:                        # GPUs freed: e.g. migration onto them
            self.carry_out(self.plan(lambda: [m.after_complete(self.view)
                                              for m in self.mechanisms]))
        self.launch_ready()
        slotted = now >= self.next_slot - 1e-9
        if slotted:
            tick, self.next_slot = self.next_slot, self.next_slot + self.slot
            self.decide_slot([self.admit(spec) for spec in self.admission.due(tick)])
        self.executor.turn(self, now, slotted)

    # ---- admit and decide --------------------------------------------------------------
    def admit(self, spec: JobSpec) -> int:
        j = len(self.specs)
        self.specs[j] = spec
        self.view.add(j, spec)
        self.executor.admit(j, spec)
        return j

    def decide_slot(self, arrived: Sequence[int] = ()) -> SlotPlan:
        """One slot: the arrivals told to the policy, ``decide_slot``, the plan carried
        out."""
        view = self.view

        def decide():
            for j in arrived:
                if j in view.waiting:
                    self.policy.on_arrival(view, j)
            decide_slot(view, self.policy, self.mechanisms)
        plan = self.plan(decide)
        self.carry_out(plan)
        return plan

    def plan(self, decide: Callable[[], object]) -> SlotPlan:
        """Run ``decide`` on the view as it stands now: the executor's picture, the free
        GPUs (a suspension in flight has promised its GPUs to the plan's starts)."""
        view = self.view
        now = self.clock.now()
        self.executor.observe(view, now)
        view.now = now
        state = self.state.copy()
        for j in self.asked:
            if j not in self.guests and j not in self.partner:
                state.release(self.launched[j].placement)
        for d in self.deferred:
            if view.holds_gpus(d.job_id):
                state.allocate(d.placement, d.gpu_ids)
        view.state = state
        view.plan = SlotPlan()
        decide()
        return view.plan

    # ---- place -------------------------------------------------------------------------
    def carry_out(self, plan: SlotPlan) -> None:
        if self.on_plan is not None and plan.steps:
            self.on_plan(self.clock.now(), plan)
        for step in plan.steps:
            j = step.job_id
            if isinstance(step, Suspend):
                # a planned start of it not launched yet is dropped; a launched one stops
                self.deferred = [d for d in self.deferred if d.job_id != j]
                if j not in self.launched or j in self.asked:
                    continue
                why = self.policy.name if step.why == "policy" else step.why
                self.asked[j] = why
                self.executor.suspend(j, why)
            else:
                self.deferred.append(step)
        self.launch_ready()

    def launch_ready(self) -> None:
        """Launch the planned starts whose GPUs are free (in plan order), a suspended
        job's once it has stopped."""
        view = self.view
        for d in list(self.deferred):
            j = d.job_id
            if j in self.launched:            # still stopping: it resumes after
                continue
            guest = not view.holds_gpus(j)
            host = view.partner_of(j) if guest else None
            try:      # the decision's GPU indices (a guest: its partner's)
                ids = (self.state.holds(self.name(host)) if guest
                       else self.state.allocate(d.placement, d.gpu_ids))
            except ValueError:                # held by a job still stopping
                continue
            self.deferred.remove(d)
            d = replace(d, gpu_ids=ids)
            self.launched[j] = d
            if guest:
                self.partner[j], self.partner[host] = host, j
                self.guests.add(j)
            self.executor.launch(d, host)

    # ---- execute -----------------------------------------------------------------------
    def _progress(self, j: int, now: float) -> None:
        """What the view knows of a launched job: its work done and, once every worker
        has trained, when its segment's training began (the mechanisms' segment starts
        there, as a time-slice quantum does)."""
        p = self.executor.progress(j, now)
        if p is None:
            return
        self.view.done[j] = p.done
        facts = self.view.running.get(j)
        if facts is not None and math.isinf(facts.t_last) and j not in self.asked:
            facts.t_last = p.training_since
            self.policy.on_training(self.view, j, facts.t_last)
            for m in self.mechanisms:
                m.on_start(self.view, j)
            self.executor.training(j)

    def end(self, e: Ended) -> None:
        """Job ``e.job_id``'s processes exited: its GPUs back (a packed partner keeps
        them); finished: out of the policy's picture; suspended: it waits (the view has
        had it waiting since the plan)."""
        j = e.job_id
        d = self.launched.pop(j)
        self.asked.pop(j, None)
        if (partner := leave_pair(self.partner, self.guests, j)) is None:
            self.state.release(d.placement)
        else:
            self.state.transfer(self.name(j), self.name(partner))
        self.executor.ended(e)
        if not e.suspended:
            self.view.finished(j, self.policy)
            self.deferred = [x for x in self.deferred if x.job_id != j]   # a resume, if any
