"""The scheduling-policy seam of the scheduler service ("policy step").

Once per slot the service hands the policy the queued jobs (FIFO order) and a
``ClusterState`` (free GPUs per host, ``job_scheduler.placement``); the policy answers
which jobs to start now, on how many GPUs, where. The service owns everything durable
(store, executors, GPU release); a policy only decides.

The policies are the simulator's own (``job_scheduler.policies``: lyapunov = Proteus
drift-plus-penalty + Liquid best fit and group GA, single, random, fifo, tetris), run
through :class:`SimulatorPolicyStep`, a thin adapter that shows each policy one slot
of the service as if it were the simulator. So the service decides exactly as the
simulator that evaluated the policy does. ``las`` is refused: it preempts running jobs,
which the service does not do.

Differences from the simulator, both deliberate: C(n) uses the placement's bandwidth on
an otherwise idle fabric (``estimator.effective_bandwidth``; the simulator also shares
rack uplinks with the running jobs' flows), and after a restart every queued job is
shown to the policy as a new arrival, so the Lyapunov Q is rebuilt from the queue while
Z restarts at 0 (Z only makes a waiting head job more eager to go: a decision
heuristic, not acknowledged data).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from job_scheduler import policies as sim_policies
from job_scheduler.estimator import Estimator, effective_bandwidth
from sluice_common.jobspec import JobSpec
from job_scheduler.placement import ClusterState, Placement
from sluice_common.errors import InputError
from topologies import Topology

# las and sluice preempt running jobs, which the service does not do
SERVICE_POLICIES = tuple(n for n in sim_policies.POLICY_NAMES if n not in ("las", "sluice"))
DEFAULT_V = sim_policies.DEFAULT_V
DEFAULT_EPS = sim_policies.DEFAULT_EPS


@dataclass(frozen=True)
class QueuedJob:
    id: int
    spec: JobSpec
    submitted_at: float


@dataclass(frozen=True)
class StartDecision:
    """A policy's answer for one queued job: start it now, on this placement."""
    job_id: int
    placement: Placement
    # Extra facts a policy wants recorded with the job (e.g. its C(n)).
    notes: dict = field(default_factory=dict, compare=False)

    @property
    def gpus(self) -> int:
        return self.placement.gpus

    @property
    def ps_hosts(self) -> tuple[str, ...]:
        return self.placement.ps_hosts

    @property
    def worker_hosts(self) -> tuple[str, ...]:
        return self.placement.worker_hosts

    def gpus_by_host(self) -> dict[str, int]:
        return self.placement.gpus_by_host()

    def placement_record(self) -> dict:
        """The placement as the store keeps it (JSON)."""
        return {"ps_hosts": list(self.ps_hosts), "worker_hosts": list(self.worker_hosts),
                "gpus_by_host": self.gpus_by_host(), **({"notes": self.notes} if self.notes else {})}


class PolicyStep(Protocol):
    """``state`` is a scratch copy of the cluster's free GPUs: a step may allocate on it
    while it decides several jobs; the service re-derives the real state from its store."""

    def __call__(self, queued: Sequence[QueuedJob], state: ClusterState,
                 now: float) -> list[StartDecision]: ...


class _JobFigures:
    """What a simulator policy reads per job: Cost(1) and C(n, bw)."""

    __slots__ = ("spec", "cost1", "_est")

    def __init__(self, spec: JobSpec, estimator: Estimator):
        self.spec, self._est = spec, estimator
        self.cost1 = estimator.cost1(spec)

    def C(self, n: int, bw: float) -> float:
        return self._est.C(self.spec, n, bw)


class _SlotView:
    """One slot of the service, seen through the simulator's interface (``state``,
    ``waiting``, ``jobs``, ``models``, ``now``, ``decisions``, ``live_bandwidth``,
    ``start``)."""

    def __init__(self, topology: Topology, state: ClusterState, queued: Sequence[QueuedJob],
                 models: dict[int, _JobFigures], now: float):
        self.topology = topology
        self.state = state
        self.now = now
        self.decisions = 0
        self.jobs = {q.id: q.spec for q in queued}
        self.models = models
        self.waiting: dict[int, None] = dict.fromkeys(q.id for q in queued)
        self.started: list[tuple[int, Placement]] = []

    def live_bandwidth(self, placement: Placement, *args, **kwargs) -> float:
        return effective_bandwidth(self.topology, placement.ps_hosts, placement.worker_hosts)

    def start(self, j: int, placement: Placement) -> None:
        self.state.allocate(placement)
        del self.waiting[j]
        self.started.append((j, placement))

    def preempt(self, j: int) -> None:
        raise RuntimeError("the scheduler service does not preempt running jobs")


class SimulatorPolicyStep:
    """A ``job_scheduler.policies`` policy object as a PolicyStep."""

    def __init__(self, name: str, topology: Topology, estimator: Estimator, **options):
        self.name = name
        self.topology = topology
        self.estimator = estimator
        try:
            self.policy = sim_policies.make_policy(name, **options)
        except ValueError as err:
            raise InputError("--policy", f"{name}: {err}")
        self._models: dict[int, _JobFigures] = {}

    def __call__(self, queued: Sequence[QueuedJob], state: ClusterState,
                 now: float) -> list[StartDecision]:
        live = {q.id for q in queued}
        new = [q for q in queued if q.id not in self._models]
        # forget jobs that left the queue (started, cancelled): they re-arrive if retried
        self._models = {j: m for j, m in self._models.items() if j in live}
        for q in new:
            self._models[q.id] = _JobFigures(q.spec, self.estimator)
        view = _SlotView(self.topology, state, queued, self._models, now)
        for q in new:
            self.policy.on_arrival(view, q.id)
        if not queued:
            self.policy.idle(view, 1)
            return []
        self.policy.step(view)
        out = []
        for j, p in view.started:
            bw = effective_bandwidth(self.topology, p.ps_hosts, p.worker_hosts)
            out.append(StartDecision(j, p,
                                     notes={"C_n": round(self._models[j].C(p.gpus, bw), 3)}))
            del self._models[j]
        return out


def make_policy(name: str, topology: Topology, estimator: Estimator, **options) -> PolicyStep:
    if name not in SERVICE_POLICIES:
        why = " (las preempts running jobs; the service does not)" if name == "las" else ""
        raise InputError("--policy", f"unknown policy {name!r}{why} "
                         f"(known: {', '.join(SERVICE_POLICIES)})")
    return SimulatorPolicyStep(name, topology, estimator, **options)
