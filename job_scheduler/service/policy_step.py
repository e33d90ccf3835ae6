"""The scheduling-policy seam of the scheduler service ("policy step").

Once per slot the service hands the policy step a ``ClusterState`` (free GPUs per host);
the step answers which queued jobs start now, on how many GPUs, where. The service owns
everything durable (store, executors, GPU release); a policy only decides. The policies
are the simulator's own (``job_scheduler.core.policies``), driven by the simulator's loop body
(``decisions.decide_slot``) on a ``LiveView``, so the service decides exactly as the
simulator that evaluated the policy (``Simulator(bandwidth="idle")``: C(n) on an
otherwise idle fabric; tests/unit/job_scheduler/core/test_decisions.py). A preemptive policy (``las``,
``sluice``) also sees the running jobs it started (``service_view.ServiceView``, the
simulator's picture of their progress) and may answer a ``Suspend``: the service
carries it out through its executor (a checkpoint, the GPUs freed) and the job waits
again with the work it has left. After a restart every queued job is shown to the
policy as a new arrival (a suspended one with its work left), so the Lyapunov Q is
rebuilt from the queue while Z restarts at 0 (a decision heuristic, not acknowledged
data); jobs still running then are not shown to a preemptive policy until they end.
"""

from __future__ import annotations

from job_scheduler.core import policies as sim_policies
from job_scheduler.core.decisions import QueuedJob, StartDecision, Suspend, decide_slot
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.service.service_view import ServiceView
from sluice_common.errors import option_error
from topologies import Topology

# every policy of the registry; the preemptive ones (las, sluice) suspend running jobs
SERVICE_POLICIES = sim_policies.POLICY_NAMES


class PolicyStep:
    """The service's policy seam: a ``job_scheduler.core.policies`` policy object, shown one
    slot of the service at a time as the simulator shows it its slots.

    C(n) is priced on the idle fabric of ``topology``; ``slot`` is the service's slot
    in seconds. The scheduler service keeps the queue here, incrementally: ``add`` when
    a job is queued, ``remove`` when it leaves without being started (cancelled),
    ``decide`` once per slot on ``state``, a scratch copy of the cluster's free GPUs (the
    service re-derives the real state from its store): O(jobs started)."""

    def __init__(self, name: str, topology: Topology, estimator: Estimator, *,
                 slot: float = 1.0, **options):
        self.name = name
        self.slot = float(slot)
        try:
            self.policy = sim_policies.make_policy(name, **options)
        except ValueError as err:
            raise option_error("policy", f"{name}: {err}")
        self.preemptive = sim_policies.REGISTRY[name].preemptive
        # the "idle" bandwidth model: C(n) on the topology itself
        self._view = ServiceView(topology, estimator, self.slot)
        self._arrived: list[int] = []     # added since the last slot: told on_arrival
        # started and not ended (a non-preemptive policy's view forgets them): a slot with
        # nothing waiting ages the policy only while none runs, as in every loop
        self._started: set[int] = set()

    @property
    def view(self) -> ServiceView:
        """The policy's picture of the jobs (read by the wait forecast's dry run)."""
        return self._view

    @property
    def has_arrivals(self) -> bool:
        """Jobs added since the last slot that the policy has not been told of yet."""
        return bool(self._arrived)

    def add(self, q: QueuedJob, *, in_id_order: bool = False, work_left: float = 1.0,
            restore_s: float = 0.0) -> None:
        """``q`` entered the queue (submitted, re-queued, or not started after all), at
        the tail; ``in_id_order``: at its place by id (FIFO by first submission: a
        retried job goes back to the head). Only that costs O(queue), and only when
        the job is older than the tail. A job suspended before comes with the
        ``work_left`` (fraction) it has and the ``restore_s`` its next start pays."""
        view = self._view
        self._started.discard(q.id)
        if q.id in view.waiting:
            return
        tail = next(reversed(view.waiting), None)
        view.add(q.id, q.spec, work_left, restore_s)
        if in_id_order and tail is not None and q.id < tail:
            view.waiting = dict.fromkeys(sorted(view.waiting))
        self._arrived.append(q.id)

    def remove(self, job_id: int) -> None:
        """``job_id`` left the queue without being started (cancelled): a policy that
        counted its work (Lyapunov's Q) takes it out (``on_leave``). A job the policy
        started stays in a preemptive policy's picture until it ends (``ended``)."""
        view = self._view
        if job_id in view.running:
            return
        was_waiting = view.waiting.pop(job_id, 0) is None
        if job_id in self._arrived:        # never told: nothing of it was counted
            self._arrived.remove(job_id)
        elif was_waiting and job_id in view.models:
            self.policy.on_leave(view, job_id)
        self._forget(job_id)

    def ended(self, job_id: int) -> None:
        """Running job ``job_id`` ended (finished, failed, cancelled, or suspended by
        its resource manager): a preemptive policy stops counting it."""
        view = self._view
        self._started.discard(job_id)
        if job_id in view.running:
            view.finished(job_id, self.policy)
        self._forget(job_id)

    def suspended(self, job_id: int, work_left: float) -> None:
        """The executor measured what a job this slot suspended has left."""
        if job_id in self._view.waiting:
            self._view.work_left[job_id] = work_left

    def _forget(self, job_id: int) -> None:
        self._view.drop(job_id)      # a non-preemptive policy is shown no running job
        self.policy.forget(job_id)

    def decide(self, state: ClusterState, now: float,
               progress: dict[int, float] | None = None) -> list[StartDecision | Suspend]:
        """One slot: which queued jobs start now, where, and (a preemptive policy)
        which running jobs are suspended first, in the order they are taken.
        ``progress``: running job -> work left, as its executor measured it."""
        view = self._view
        view.state, view.now, view.decisions = state, now, 0
        for j, left in (progress or {}).items():
            view.observe(j, left)
        arrived, self._arrived = self._arrived, []
        for j in arrived:
            if j in view.waiting:
                self.policy.on_arrival(view, j)
        regrow = self.preemptive and view.running and state.total_free
        if not view.waiting and not regrow:
            if not self._started:
                self.policy.idle(view, 1)       # as decide_slot ages it
            return []
        out: list[StartDecision | Suspend] = []
        for d in decide_slot(view, self.policy).steps:
            if isinstance(d, Suspend):
                out.append(d)
                continue
            self._started.add(d.job_id)
            bw = view.live_bandwidth(d.placement)
            out.append(StartDecision(d.job_id, view.user_placement(d.job_id, d.placement),
                                     d.gpu_ids, notes={
                                         "C_n": round(view.models[d.job_id].C(
                                             d.gpus, bw, view.exchange_path(d.placement)), 3)}))
            if not self.preemptive:
                self._forget(d.job_id)
        return out


def make_policy_step(name: str, topology: Topology, estimator: Estimator, **options) -> PolicyStep:
    """The service's policy step for a policy of the registry (``policies.POLICY_NAMES``);
    ``options`` go to ``policies.make_policy`` but ``slot``."""
    if name not in SERVICE_POLICIES:
        raise option_error("policy", f"unknown policy {name!r} "
                         f"(known: {', '.join(SERVICE_POLICIES)})")
    return PolicyStep(name, topology, estimator, **options)
