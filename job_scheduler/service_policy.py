"""The scheduling-policy seam of the scheduler service ("policy step").

Once per slot the service hands the policy the queued jobs (FIFO order) and a
``ClusterState`` (free GPUs per host, ``job_scheduler.placement``); the policy answers
which jobs to start now, on how many GPUs, where. The service owns everything durable
(store, executors, GPU release); a policy only decides.

The policies are the simulator's own (``job_scheduler.policies``: lyapunov = Proteus
drift-plus-penalty + Liquid best fit and group GA, single, random, fifo, tetris), run
through :class:`SimulatorPolicyStep`, a thin adapter that shows each policy one slot
of the service as if it were the simulator. So the service decides exactly as the
simulator that evaluated the policy does. The preemptive ones (``las``, ``sluice``;
``policies.NON_PREEMPTIVE`` is the rest) are refused: the service does not suspend
running jobs.

Differences from the simulator, both deliberate: C(n) uses the placement's bandwidth on
an otherwise idle fabric by default (the "idle" bandwidth model of job_scheduler/context.py;
the simulator's default "shared" model also shares rack uplinks with the running jobs'
flows; ``Simulator(bandwidth="idle")`` decides exactly as the service), and after a restart every queued job is
shown to the policy as a new arrival, so the Lyapunov Q is rebuilt from the queue while
Z restarts at 0 (Z only makes a waiting head job more eager to go: a decision
heuristic, not acknowledged data).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from job_scheduler import policies as sim_policies
from job_scheduler.estimator import Estimator, effective_bandwidth
from sluice_common.jobspec import JobSpec
from job_scheduler.placement import ClusterState, Placement
from job_scheduler.simulator import JobModel   # C(n) per job, the simulator's own
from sluice_common.errors import InputError
from topologies import Topology

# the registry's policies less the preemptive ones (las, sluice): the service does not
# suspend running jobs
SERVICE_POLICIES = sim_policies.NON_PREEMPTIVE
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


class IdleFabric:
    """The "idle" bandwidth model: a placement's bandwidth with the fabric to itself.
    On the topology the run loop derives from measured link use, the "measured" one."""

    def __init__(self, topology: Topology):
        self.topology = topology

    def __call__(self, placement: Placement) -> float:
        return effective_bandwidth(self.topology, placement.ps_hosts, placement.worker_hosts)


class _SlotView:
    """One slot of the service as a ``SchedulingContext`` (job_scheduler/context.py)."""

    def __init__(self, bandwidth: Callable[[Placement], float], state: ClusterState,
                 queued: Sequence[QueuedJob], models: dict[int, JobModel], now: float,
                 slot: float):
        self.bandwidth = bandwidth
        self.state = state
        self.now = now
        self.slot = slot
        self.decisions = 0
        self.jobs = {q.id: q.spec for q in queued}
        self.models = models
        self.waiting: dict[int, None] = dict.fromkeys(q.id for q in queued)
        self.started: list[tuple[int, Placement]] = []

    def live_bandwidth(self, placement: Placement, *args, **kwargs) -> float:
        return self.bandwidth(placement)

    def start(self, j: int, placement: Placement) -> None:
        self.state.allocate(placement)
        del self.waiting[j]
        self.started.append((j, placement))

    def preempt(self, j: int) -> None:
        raise RuntimeError("the scheduler service does not preempt running jobs")


class SimulatorPolicyStep:
    """A ``job_scheduler.policies`` policy object as a PolicyStep.

    ``bandwidth`` is the loop's bandwidth model (placement -> Mbit/s), by default the
    idle fabric of ``topology``; the run loop sets it each slot to the measured fabric
    (``use_bandwidth``). ``slot`` is the service's slot in seconds."""

    def __init__(self, name: str, topology: Topology, estimator: Estimator, *,
                 slot: float = 1.0, **options):
        self.name = name
        self.topology = topology
        self.bandwidth: Callable[[Placement], float] = IdleFabric(topology)
        self.slot = float(slot)
        self.estimator = estimator
        try:
            self.policy = sim_policies.make_policy(name, **options)
        except ValueError as err:
            raise InputError("--policy", f"{name}: {err}")
        self._models: dict[int, JobModel] = {}

    def use_bandwidth(self, model: Callable[[Placement], float]) -> None:
        """Price C(n) with this bandwidth model from the next slot on."""
        self.bandwidth = model

    def __call__(self, queued: Sequence[QueuedJob], state: ClusterState,
                 now: float) -> list[StartDecision]:
        live = {q.id for q in queued}
        new = [q for q in queued if q.id not in self._models]
        # forget jobs that left the queue (started, cancelled): they re-arrive if retried
        self._models = {j: m for j, m in self._models.items() if j in live}
        for q in new:
            self._models[q.id] = JobModel(q.spec, self.estimator)
        view = _SlotView(self.bandwidth, state, queued, self._models, now, self.slot)
        for q in new:
            self.policy.on_arrival(view, q.id)
        if not queued:
            self.policy.idle(view, 1)
            return []
        self.policy.step(view)
        out = []
        for j, p in view.started:
            bw = self.bandwidth(p)
            out.append(StartDecision(j, p,
                                     notes={"C_n": round(self._models[j].C(p.gpus, bw), 3)}))
            del self._models[j]
        return out


def make_policy(name: str, topology: Topology, estimator: Estimator, **options) -> PolicyStep:
    """The service's policy step for a policy of the registry (``policies.POLICY_NAMES``
    less the preemptive ones); ``options`` go to ``policies.make_policy`` but ``slot``."""
    if name not in SERVICE_POLICIES:
        entry = sim_policies.REGISTRY.get(name)
        why = (f" ({name} preempts running jobs; the service does not)"
               if entry is not None and entry.preemptive else "")
        raise InputError("--policy", f"unknown policy {name!r}{why} "
                         f"(known: {', '.join(SERVICE_POLICIES)})")
    return SimulatorPolicyStep(name, topology, estimator, **options)
