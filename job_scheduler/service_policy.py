"""The scheduling-policy seam of the scheduler service ("policy step").

Once per slot the service hands the policy the queued jobs (FIFO order) and a
``ClusterState`` (free GPUs per host, ``job_scheduler.placement``); the policy answers
which jobs to start now, on how many GPUs, where. The service owns everything durable
(store, executors, GPU release); a policy only decides, so policies are swappable
(Blox-style) and are built from the same pieces as the simulator's.

``make_policy(name, topology, estimator)`` returns a PolicyStep:
- ``lyapunov``: the Proteus decision (``proteus.decide``: drift-plus-penalty over the GPU
  count, C(n) from the estimator at the bandwidth of the Liquid placement for that n)
  with Liquid best-fit placement (``placement.BestFitPlacement``);
- ``fifo``: head-of-line FIFO, each job gets ``max_gpus``, first-fit hosts.

Q is read from the queue each slot (the sum of the queued jobs' Cost(1)), so it is exact
after a restart; Z lives in memory and restarts at 0 (it only makes a waiting head job
more eager to go: a decision heuristic, not acknowledged data).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from job_scheduler.jobspec import JobSpec
from job_scheduler import proteus
from job_scheduler.estimator import Estimator, effective_bandwidth
from job_scheduler.placement import BestFitPlacement, ClusterState, FirstFitPlacement, Placement
from sluice.errors import InputError
from topologies import Topology


@dataclass(frozen=True)
class QueuedJob:
    id: int
    spec: JobSpec
    submitted_at: float


@dataclass(frozen=True)
class StartDecision:
    job_id: int
    gpus: int
    ps_hosts: tuple[str, ...]
    worker_hosts: tuple[str, ...]          # one entry per worker GPU (hosts repeat)
    # Extra facts a policy wants recorded with the job (e.g. its S(n), C(n)).
    notes: dict = field(default_factory=dict, compare=False)

    def as_placement(self) -> Placement:
        return Placement(str(self.job_id), self.ps_hosts, self.worker_hosts)

    def gpus_by_host(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for h in self.worker_hosts:
            out[h] = out.get(h, 0) + 1
        return out

    def placement(self) -> dict:
        return {"ps_hosts": list(self.ps_hosts), "worker_hosts": list(self.worker_hosts),
                "gpus_by_host": self.gpus_by_host(), **({"notes": self.notes} if self.notes else {})}


class PolicyStep(Protocol):
    """``state`` is a scratch copy of the cluster's free GPUs: a step may allocate on it
    while it decides several jobs; the service re-derives the real state from its store."""

    def __call__(self, queued: Sequence[QueuedJob], state: ClusterState,
                 now: float) -> list[StartDecision]: ...


def fifo_policy(topology: Topology) -> PolicyStep:
    """Head-of-line FIFO with ``max_gpus`` per job, first-fit hosts (the Tiresias/YARN
    FIFO baseline)."""
    placer = FirstFitPlacement()

    def step(queued: Sequence[QueuedJob], state: ClusterState,
             now: float) -> list[StartDecision]:
        out = []
        for job in queued:
            placement = placer.place(state, str(job.id), job.spec.max_gpus, job.spec.num_ps)
            if placement is None:
                break                      # head-of-line blocking, as FIFO does
            state.allocate(placement)
            out.append(StartDecision(job.id, placement.gpus, placement.ps_hosts,
                                     placement.worker_hosts))
        return out

    return step


# V and eps in seconds (proteus.py explains them). V = 1: one second of the job's own
# C(n) weighs as much as the backlog terms; eps = 60: a waiting head job gains a minute
# of urgency per slot.
DEFAULT_V = 1.0
DEFAULT_EPS = 60.0


class LyapunovPolicy:
    """Proteus + Liquid, slot by slot, head-of-line like the paper: the head job starts
    on the n minimising S(n) when S(n) < 0, then the next head is considered in the same
    slot with Q reduced by the work served; otherwise the queue waits a slot."""

    def __init__(self, topology: Topology, estimator: Estimator, V: float = DEFAULT_V,
                 eps: float = DEFAULT_EPS):
        self.topology = topology
        self.estimator = estimator
        self.V = V
        self.placer = BestFitPlacement()
        self.state = proteus.LyapunovState(eps=eps)
        self._seen: set[int] = set()

    def costs(self, job: QueuedJob, state: ClusterState) -> tuple[dict[int, float], dict[int, Placement]]:
        """C(n) for every feasible n, each at the bandwidth of its own placement."""
        costs, placements = {}, {}
        for n in range(1, min(job.spec.max_gpus, state.total_free) + 1):
            p = self.placer.place(state, str(job.id), n, job.spec.num_ps)
            if p is None:
                continue
            bw = effective_bandwidth(self.topology, p.ps_hosts, p.worker_hosts)
            costs[n] = self.estimator.C(job.spec, n, bw)
            placements[n] = p
        return costs, placements

    def __call__(self, queued: Sequence[QueuedJob], state: ClusterState,
                 now: float) -> list[StartDecision]:
        cost1 = {j.id: self.estimator.cost1(j.spec) for j in queued}
        # Q(t) is the work actually waiting (sum of Cost_j(1) of the queued jobs), read
        # from the queue every slot rather than carried by eq. Q(t+1) = max(Q - k*Cost_i(1),
        # 0) + arrivals: that recursion subtracts k*Cost_i(1) > Cost_i(1) for k > 1 and
        # would drain Q while jobs still wait (they then wait forever once Z decays);
        # rebuilt from the store it is also exact after a restart.
        self.state.Q = q_start = sum(cost1.values())
        served_total, out = 0.0, []
        for job in queued:
            costs, placements = self.costs(job, state)
            n = self.state.decide(costs, cost1[job.id], self.V, state.total_free,
                                  job.spec.max_gpus)
            if n == 0:
                break                                   # head-of-line: wait a slot
            served_total += proteus.served_work(n, cost1[job.id])
            self.state.Q -= cost1[job.id]               # the head job left the queue
            p = placements[n]
            state.allocate(p)
            out.append(StartDecision(job.id, n, p.ps_hosts, p.worker_hosts,
                                     notes={"C_n": round(costs[n], 3), "Q": round(q_start, 3),
                                            "Z": round(self.state.Z, 3)}))
        self.state.Z = proteus.update_Z(self.state.Z, q_start, self.state.eps, served_total)
        return out


POLICIES: dict[str, Callable[..., PolicyStep]] = {
    "lyapunov": lambda topology, estimator, **kw: LyapunovPolicy(topology, estimator, **kw),
    "fifo": lambda topology, estimator, **kw: fifo_policy(topology),
}


def make_policy(name: str, topology: Topology, estimator: Estimator, **options) -> PolicyStep:
    factory = POLICIES.get(name)
    if factory is None:
        raise InputError("--policy", f"unknown policy {name!r} "
                         f"(known: {', '.join(sorted(POLICIES))})")
    return factory(topology, estimator, **options)
