"""``lyapunov``: Proteus' drift-plus-penalty GPU count for the FIFO head job, Liquid
best-fit placement, and Liquid's group GA for a slot's batch of starts."""

from __future__ import annotations

from collections import deque

from job_scheduler.core import proteus
from job_scheduler.core.placement import DEFAULT_LAMBDA, BestFitPlacement, GroupGA, Request
from sluice_common.placement import Placement
from job_scheduler.core.policies.base import Policy, PolicyOptions, candidate_costs

# Defaults of the Lyapunov knobs (seconds). V weighs C(n) against the backlog; eps is
# Z's growth per slot. See proteus.py for what they do; `sluice simulate --V/--eps`.
# One setting for every workload, picked from the V x eps sweep recorded in
# bench/results/simulator.md (10-s slots; best geometric mean over the four Proteus
# scenarios and the Tiresias trace; picked under k = n, and under k = 1 per job the
# ratios are flat around it wherever V/eps is below ~10 slots). Both scale with job size (S compares V*C(n) with
# n*Cost(1)*(Z+Q)): a workload of much longer or shorter jobs wants them rescaled.
DEFAULT_V = 10_000.0
DEFAULT_EPS = 6_000.0
# The reading of k in k*Cost_i(1) (proteus.served_work): "job" = one job served per
# start (k = 1[n > 0]); "gpus" = k = n. Why "job" is the default: proteus.py's docstring
# and bench/results/proteus-gap.md (it keeps the paper's Q update exact; measured on the
# four Proteus scenarios it is the better scheduler at the same V, eps).
DEFAULT_K = "job"
# entries kept of the Lyapunov histories (Philly on cluster-2k at 60-s slots: ~160k)
HISTORY = 250_000


class LyapunovPolicy(Policy):
    """Proteus: each slot the FIFO head job gets the n minimising
    ``S(n) = V*C(n) + (k*Cost(1))^2 - k*Cost(1)*(Z+Q)`` when that is < 0, else waits;
    ``k`` = 1 per started job (``k="job"``, the default: then n = argmin C(n) and the
    queues decide when) or k = n (``k="gpus"``). C(n) uses the bandwidth of the Liquid
    best-fit placement n would get *now* (including the rack-uplink sharing with running
    jobs). Several jobs may start in one slot: after each start Z drops by the served
    work ``k*Cost(1)`` (Z gains eps once per slot). Q is kept equal to the waiting work:
    a job's ``Cost(1)`` enters Q at the first slot boundary after it arrives and leaves
    it when the job starts — exactly the paper's Q update with k = "job". (Draining Q
    by ``n*Cost(1)``, as ``proteus.update_Q`` with k = n would, can empty Q while jobs
    still wait; then Z decays instead of growing and a job left alone waits forever —
    measured: the simulator spun without end on proteus-big-* scenarios.) When a
    slot starts two or more jobs and one of them spans hosts, the batch is re-placed
    together by Liquid's group GA (never worse than best fit on its objective)."""

    name = "lyapunov"

    def __init__(self, V: float = DEFAULT_V, eps: float = DEFAULT_EPS,
                 lam: float = DEFAULT_LAMBDA, seed: int = 0, ga: bool = True,
                 k: str = DEFAULT_K):
        if not V >= 0 or not eps >= 0:
            raise ValueError("V and eps must be >= 0")
        if k not in proteus.K_READINGS:
            raise ValueError(f"unknown reading of k {k!r} (known: {', '.join(proteus.K_READINGS)})")
        self.V, self.eps, self.k = float(V), float(eps), k
        self.placer = BestFitPlacement(lam)
        self.ga = GroupGA(lam=lam, seed=seed) if ga else None
        self.queues = proteus.LyapunovState(eps=self.eps)     # Q and Z
        self._cache: dict[int, tuple[int, int, dict[int, float], dict[int, Placement]]] = {}
        # histories for plots and the V trade-off; bounded, because the scheduler
        # service runs this policy every slot for as long as it lives
        self.trace: deque[tuple[float, float, float]] = deque(maxlen=HISTORY)  # (t, Q, Z)
        self.served_C: deque[float] = deque(maxlen=HISTORY)   # C(n) of every started job
        self.backlog: deque[float] = deque(maxlen=HISTORY)    # Q at every decision slot

    @property
    def Q(self) -> float:
        return self.queues.Q

    @property
    def Z(self) -> float:
        return self.queues.Z

    def on_arrival(self, sim, j: int) -> None:
        # arrived during the slot that just ended: part of Q(t) for this slot's decision
        self.queues.arrive([sim.models[j].cost1])

    # the mechanisms' hooks (time-slicing, packing): Q stays the waiting work
    def on_requeue(self, sim, j: int) -> None:
        self.queues.arrive([sim.models[j].cost1])

    def on_packed(self, sim, j: int) -> None:
        self.queues.Q = max(self.queues.Q - sim.models[j].cost1, 0.0)

    def on_leave(self, sim, j: int) -> None:
        """``j`` left the queue without starting (cancelled in the scheduler service):
        its work leaves Q, which stays the waiting work (else one cancelled huge job
        would inflate Q, and so every later decision, for good)."""
        self.queues.Q = max(self.queues.Q - sim.models[j].cost1, 0.0)
        if not sim.waiting:
            self.queues.Q = 0.0       # nothing waiting: drop float residue

    def wants_slot(self, sim) -> bool:
        return True         # Z grows every slot a job waits: the answer may change

    def idle(self, sim, slots: int) -> None:
        # Nothing waiting (Q == 0): Z halves every slot; after 64 halvings it is 0.
        for k in range(min(slots, 64)):
            self.queues.wait()
            if k == 0:
                self.trace.append((sim.now + sim.slot, self.Q, self.Z))
        if slots > 64:
            self.queues.Z = 0.0 if self.Q == 0 else self.Z
        self.trace.append((sim.now + slots * sim.slot, self.Q, self.Z))

    def _costs(self, sim, j: int, limit: int) -> tuple[dict[int, float], dict[int, Placement]]:
        """C(n) and the placement behind it for the candidate n, cached until the
        cluster state changes."""
        key = (sim.state.version, limit)
        hit = self._cache.get(j)
        if hit is not None and hit[:2] == key:
            return hit[2], hit[3]
        costs, places = candidate_costs(sim, j, limit, self.placer, place_one=False)
        self._cache = {j: (*key, costs, places)}      # only the head is ever asked
        return costs, places

    def step(self, sim) -> None:
        state = sim.state
        batch: list[tuple[int, Placement]] = []
        first = True
        for j in sim.waiting:         # not modified inside the loop: starts come after
            job, model = sim.jobs[j], sim.models[j]
            limit = min(job.max_gpus, state.total_free)
            n = 0
            if limit > 0:
                costs, places = self._costs(sim, j, limit)
                n = self.queues.decide(costs, model.cost1, self.V, state.total_free,
                                       job.max_gpus, self.k)
            sim.decisions += 1
            if n == 0:
                break
            served = proteus.served_work(n, model.cost1, self.k)
            self.queues.serve(served, model.cost1, first)     # the job leaves the queue
            first = False
            p = places[n] if n > 1 else self.placer.place(state, job.name, 1, job.num_ps)
            self.served_C.append(costs[n])
            state.allocate(p)             # tentatively, so the next decision sees it
            batch.append((j, p))
        if first:
            self.queues.wait()
        if len(batch) == len(sim.waiting):
            self.queues.Q = 0.0   # nothing left waiting: drop float residue
        self.backlog.append(self.Q)
        for _, p in batch:
            state.release(p)
        if self.ga is not None and len(batch) >= 2 and any(p.gpus > 1 for _, p in batch):
            reqs = [Request(p.job, p.gpus, len(p.ps_hosts)) for _, p in batch]
            placed = self.ga.place_batch(state, reqs)
            batch = [(j, q if q is not None else p) for (j, p), q in zip(batch, placed)]
        for j, p in batch:
            sim.start(j, p)
        self.trace.append((sim.now, self.Q, self.Z))


def make(o: PolicyOptions) -> LyapunovPolicy:
    pol = LyapunovPolicy(V=o.V, eps=o.eps, lam=o.lam, seed=o.seed, ga=o.ga, k=o.k)
    if o.placement:
        pol.placer = o.placer("best-fit")
        pol.ga = pol.ga if o.placement == "best-fit" else None
    return pol
