"""Scheduling policies, Blox-style: admission order, GPU-count decision and placement
are separate pieces, composed per policy, and every policy runs in the same simulator
(:mod:`job_scheduler.simulator`) through the same placement code
(:mod:`job_scheduler.placement`), so comparisons are apples to apples.

A policy object provides (``sim`` is the loop's ``SchedulingContext``, the one contract
of job_scheduler/context.py that the simulator, the service and the run all drive):

* ``on_arrival(sim, j)`` — a job entered the waiting list;
* ``step(sim)`` — at a slot boundary, start (``sim.start``) or preempt (``sim.preempt``);
* ``wants_slot(sim)`` — must it be called again next slot even if no event happens?
* ``idle(sim, slots)`` — that many slots passed with no call (nothing could change).

Policies (``make_policy(name, ...)``):

========  ===================  =====================================  ==============
name      admission            GPU count                              placement
========  ===================  =====================================  ==============
lyapunov  FIFO head-of-line    Proteus drift-plus-penalty (proteus)   Liquid best fit
                                                                      (+ group GA for a
                                                                      slot's batch)
single    FIFO head-of-line    1                                      Liquid best fit
random    FIFO head-of-line    uniform in [1, max_gpus], seeded       Liquid best fit
fifo      FIFO head-of-line    requested (trace_gpus or max_gpus)     first fit
tetris    packing (backfill)   requested                              Tetris cosine
las       2D-LAS priority      requested (fixed), preemptive          first fit
sluice    shortest predicted   drift-plus-penalty argmin, the queue's Liquid best fit
          remaining work,      GPU time priced (sluice.py)    
          preemptive at a cost
========  ===================  =====================================  ==============
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from typing import Callable

from job_scheduler import proteus
from job_scheduler.fit_index import FitIndex
from job_scheduler.proteus import candidate_counts
from sluice_common.jobspec import JobSpec
from job_scheduler.placement import (DEFAULT_LAMBDA, BestFitPlacement, FirstFitPlacement,
                                     GroupGA, Placement, Request, TetrisPlacement)
from sluice_common.errors import InputError

POLICY_NAMES = ("lyapunov", "single", "random", "fifo", "tetris", "las", "sluice")

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
# Tiresias 2D-LAS: one threshold (GPU-seconds of attained service) = two queues,
# Tiresias' own default queue limit.
DEFAULT_LAS_THRESHOLDS = (3600.0,)
# entries kept of the Lyapunov histories (Philly on cluster-2k at 60-s slots: ~160k)
HISTORY = 250_000


def requested_gpus(job: JobSpec) -> int:
    """What a job asks for: its trace's GPU count for trace jobs, else max_gpus."""
    return job.trace_gpus if job.trace_gpus else job.max_gpus


# ---- GPU-count decisions for the non-Lyapunov policies ----------------------------------

class FixedCountPolicy:
    """Head-of-line FIFO (or backfilling, ``backfill=True``) at a GPU count fixed per
    job by ``count``, placed by ``placer``. Nothing changes between events, so the
    simulator may skip straight to the next arrival or completion."""

    def __init__(self, name: str, count: Callable[[JobSpec], int], placer, *,
                 backfill: bool = False, clamp: bool = False):
        self.name = name
        self.clamp = clamp          # cap the count at the cluster size (random) or refuse
        self.count = count
        self.placer = placer
        self.backfill = backfill
        self._n: dict[int, int] = {}

    def on_arrival(self, sim, j: int) -> None:
        n = self.count(sim.jobs[j])
        if self.clamp:
            n = min(n, sim.state.total_gpus)
        if n > sim.state.total_gpus:
            raise ValueError(f"policy {self.name}: job '{sim.jobs[j].name}' needs {n} GPUs, "
                             f"the cluster has {sim.state.total_gpus}")
        self._n[j] = n

    def wants_slot(self, sim) -> bool:
        return False

    def idle(self, sim, slots: int) -> None:
        pass

    def step(self, sim) -> None:
        state = sim.state
        if self.backfill:
            # smallest-first scan would starve big jobs; arrival order, skip misfits
            for j in [j for j in sim.waiting if self._n[j] <= state.total_free]:
                if self._n[j] <= state.total_free:
                    self._try(sim, j)
            return
        while sim.waiting and state.total_free:     # head-of-line: O(started), not O(queue)
            if not self._try(sim, next(iter(sim.waiting))):
                return

    def _try(self, sim, j: int) -> bool:
        n, job = self._n[j], sim.jobs[j]
        sim.decisions += 1
        p = self.placer.place(sim.state, job.name, n, job.num_ps) \
            if n <= sim.state.total_free else None
        if p is not None:
            sim.start(j, p)
        return p is not None


def _random_count(seed: int) -> Callable[[JobSpec], int]:
    rng = random.Random(seed)
    # drawn once per job, in arrival order (on_arrival), so a seed fixes the counts
    return lambda job: rng.randint(1, max(job.max_gpus, 1))


# ---- Proteus (Lyapunov) + Liquid ---------------------------------------------------------

class LyapunovPolicy:
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
                 trace_every: float = 0.0, k: str = DEFAULT_K):
        if not V >= 0 or not eps >= 0:
            raise ValueError("V and eps must be >= 0")
        if k not in proteus.K_READINGS:
            raise ValueError(f"unknown reading of k {k!r} (known: {', '.join(proteus.K_READINGS)})")
        self.V, self.eps, self.k = float(V), float(eps), k
        self.placer = BestFitPlacement(lam)
        self.ga = GroupGA(lam=lam, seed=seed) if ga else None
        self.Q = 0.0
        self.Z = 0.0
        self._cache: dict[int, tuple[int, int, dict[int, float], dict[int, Placement]]] = {}
        # histories for plots and the V trade-off; bounded, because the scheduler
        # service runs this policy every slot for as long as it lives
        self.trace: deque[tuple[float, float, float]] = deque(maxlen=HISTORY)  # (t, Q, Z)
        self.trace_every = trace_every
        self._last_trace = -float("inf")
        self.served_C: deque[float] = deque(maxlen=HISTORY)   # C(n) of every started job
        self.backlog: deque[float] = deque(maxlen=HISTORY)    # Q at every decision slot

    def on_arrival(self, sim, j: int) -> None:
        # arrived during the slot that just ended: part of Q(t) for this slot's decision
        self.Q = proteus.update_Q(self.Q, 0.0, [sim.models[j].cost1])

    def wants_slot(self, sim) -> bool:
        return True         # Z grows every slot a job waits: the answer may change

    def idle(self, sim, slots: int) -> None:
        # Nothing waiting (Q == 0): Z halves every slot; after 64 halvings it is 0.
        for k in range(min(slots, 64)):
            self.Z = proteus.update_Z(self.Z, self.Q, self.eps, 0.0)
            self.Q = proteus.update_Q(self.Q, 0.0)
            if k == 0:
                self.trace.append((sim.now + sim.slot, self.Q, self.Z))
        if slots > 64:
            self.Z = 0.0 if self.Q == 0 else self.Z
        self.trace.append((sim.now + slots * sim.slot, self.Q, self.Z))

    def _costs(self, sim, j: int, limit: int) -> tuple[dict[int, float], dict[int, Placement]]:
        """C(n) and the placement behind it for the candidate n, cached until the
        cluster state changes."""
        key = (sim.state.version, limit)
        hit = self._cache.get(j)
        if hit is not None and hit[:2] == key:
            return hit[2], hit[3]
        job, model = sim.jobs[j], sim.models[j]
        costs: dict[int, float] = {}
        places: dict[int, Placement] = {}
        for n in candidate_counts(limit):
            if n == 1:
                costs[1] = model.cost1      # C(1) = Cost(1): no bandwidth involved;
                continue                    # placed only if chosen (see step)
            p = self.placer.place(sim.state, job.name, n, job.num_ps)
            if p is None:
                continue
            places[n] = p
            costs[n] = model.C(n, sim.live_bandwidth(p))
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
                n = proteus.decide(costs, model.cost1, self.Q, self.Z, self.V,
                                   state.total_free, job.max_gpus, self.k)
            sim.decisions += 1
            if n == 0:
                break
            served = proteus.served_work(n, model.cost1, self.k)
            self.Z = proteus.update_Z(self.Z, self.Q, self.eps if first else 0.0, served)
            self.Q = proteus.update_Q(self.Q, model.cost1)     # the job leaves the queue
            first = False
            p = places[n] if n > 1 else self.placer.place(state, job.name, 1, job.num_ps)
            self.served_C.append(costs[n])
            state.allocate(p)             # tentatively, so the next decision sees it
            batch.append((j, p))
        if first:
            self.Z = proteus.update_Z(self.Z, self.Q, self.eps, 0.0)
        if len(batch) == len(sim.waiting):
            self.Q = 0.0          # nothing left waiting: drop float residue
        self.backlog.append(self.Q)
        for _, p in batch:
            state.release(p)
        if self.ga is not None and len(batch) >= 2 and any(p.gpus > 1 for _, p in batch):
            reqs = [Request(p.job, p.gpus, len(p.ps_hosts)) for _, p in batch]
            placed = self.ga.place_batch(state, reqs)
            batch = [(j, q if q is not None else p) for (j, p), q in zip(batch, placed)]
        for j, p in batch:
            sim.start(j, p)
        if sim.now - self._last_trace >= self.trace_every:
            self.trace.append((sim.now, self.Q, self.Z))
            self._last_trace = sim.now


# ---- Tiresias 2D-LAS ------------------------------------------------------------------------

class LasPolicy:
    """Discretized two-dimensional least-attained-service (Tiresias): attained service
    = GPUs x seconds run; a job's queue is the number of thresholds it has passed;
    lower queues first, FIFO (arrival) inside a queue. At every decision the jobs that
    fit in priority order run, the rest are preempted (progress kept; no checkpoint
    overhead is charged). Fixed GPU count (the trace's), first-fit placement.

    Event-driven: the order only changes when a job arrives, ends or a running job
    crosses a threshold, so the policy asks the simulator to wake it at the next
    crossing (``next_wakeup``) instead of every slot, and keeps waiting and running
    jobs in :class:`~job_scheduler.fit_index.FitIndex` lists (one per GPU count). A
    decision then costs O(started + running) when a preemption is possible and
    O(started x GPU counts) otherwise, never O(queue): the earlier version sorted the
    whole queue every slot and went quadratic on the Philly trace
    (bench/results/sluice.md)."""

    name = "las"

    def __init__(self, thresholds: tuple[float, ...] = DEFAULT_LAS_THRESHOLDS,
                 preempt_cost_s: float = 0.0):
        self.thresholds = tuple(sorted(thresholds))
        # suspend/resume cost per preemption; 0 (Tiresias' simulator charges none), or
        # sluice's figure to compare the two at the same price
        self.preempt_cost_s = float(preempt_cost_s)
        self.placer = FirstFitPlacement()
        self.attained: dict[int, float] = {}    # GPU-seconds, up to date at _since[j]
        self._since: dict[int, float] = {}      # running jobs: when attained was updated
        self._level: dict[int, int] = {}
        self._n: dict[int, int] = {}
        self._waiting = FitIndex()              # key (level, j)
        self._running = FitIndex()
        self._cross: list[tuple[float, int, int]] = []   # (time, j, start count)
        self._starts: dict[int, int] = {}

    def on_arrival(self, sim, j: int) -> None:
        n = requested_gpus(sim.jobs[j])
        if n > sim.state.total_gpus:
            raise ValueError(f"policy las: job '{sim.jobs[j].name}' needs {n} GPUs, the "
                             f"cluster has {sim.state.total_gpus}")
        self.attained[j], self._level[j], self._n[j] = 0.0, 0, n
        self._starts[j] = 0
        self._waiting.add(j, (0, j), n)

    def wants_slot(self, sim) -> bool:
        return False        # nothing changes between events but threshold crossings

    def next_wakeup(self, sim) -> float:
        """When the next running job crosses a threshold (its priority drops)."""
        heap = self._cross
        while heap and not self._valid(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def idle(self, sim, slots: int) -> None:
        pass

    def on_complete(self, sim, j: int) -> None:
        self._running.remove(j)
        for d in (self.attained, self._since, self._level, self._n, self._starts):
            d.pop(j, None)

    def _queue(self, attained: float) -> int:
        return sum(1 for t in self.thresholds if attained >= t)

    def _valid(self, entry) -> bool:
        _, j, k = entry
        return j in self._since and self._starts.get(j) == k

    def _update(self, j: int, now: float) -> None:
        self.attained[j] += self._n[j] * (now - self._since[j])
        self._since[j] = now

    def _push_crossing(self, j: int) -> None:
        a = self.attained[j]
        nxt = [t for t in self.thresholds if t > a]
        if nxt:
            heapq.heappush(self._cross, (self._since[j] + (nxt[0] - a) / self._n[j], j,
                                         self._starts[j]))

    def _crossings(self, now: float) -> None:
        heap = self._cross
        while heap and heap[0][0] <= now + 1e-9:
            entry = heapq.heappop(heap)
            j = entry[1]
            if not self._valid(entry):
                continue
            self._update(j, now)
            level = self._queue(self.attained[j])
            if level != self._level[j]:
                self._level[j] = level
                self._running.add(j, (level, j), self._n[j])
            self._push_crossing(j)

    def step(self, sim) -> None:
        now = sim.now
        self._crossings(now)
        best_wait = self._waiting.best()
        worst_run = self._running.worst()
        if best_wait is None:
            return
        starts: list[int] = []
        preempts: list[int] = []
        walk = self._waiting.walk()
        if worst_run is None or worst_run < best_wait:
            # every running job comes first in the order and keeps its GPUs: only the
            # free GPUs are handed out, best waiting job first
            budget = sim.state.total_free
            while budget > 0 and (w := walk.peek(budget)) is not None:
                walk.take(w[2])
                starts.append(w[1])
                budget -= w[2]
        else:
            # a waiting job outranks a running one: the full walk over both, the
            # running jobs merged lazily from their per-count lists
            budget = sim.state.total_gpus
            running = self._running.merged()
            left = sum(run.n for run in sim.running.values())   # GPUs of running not walked
            r = next(running, None)
            w = walk.peek(budget)
            while r is not None or w is not None:
                # the best waiting job that fitted a larger budget still leads while it
                # fits: look again only when it no longer does
                if w is not None and w[2] > budget:
                    w = walk.peek(budget)
                    if w is None and left <= budget:
                        break       # nothing waiting fits and every running job does
                    continue
                if w is None or (r is not None and r[0] < w[0]):
                    if r[2] <= budget:
                        budget -= r[2]
                    else:
                        preempts.append(r[1])
                    left -= r[2]
                    r = next(running, None)
                else:
                    walk.take(w[2])
                    starts.append(w[1])
                    budget -= w[2]
                    w = walk.peek(budget)
        for j in preempts:
            self._update(j, now)
            del self._since[j]
            self._running.remove(j)
            sim.preempt(j, self.preempt_cost_s)
            self._waiting.add(j, (self._level[j], j), self._n[j])
        for j in starts:
            job = sim.jobs[j]
            sim.decisions += 1
            p = self.placer.place(sim.state, job.name, self._n[j], job.num_ps)
            if p is None:
                continue
            sim.start(j, p)
            self._waiting.remove(j)
            self._running.add(j, (self._level[j], j), self._n[j])
            self._since[j] = now
            self._starts[j] += 1
            self._push_crossing(j)


# ---- the registry ----------------------------------------------------------------------------

PLACEMENTS = ("best-fit", "first-fit", "tetris")


def make_placement(name: str, lam: float = DEFAULT_LAMBDA):
    if name == "best-fit":
        return BestFitPlacement(lam)
    if name == "first-fit":
        return FirstFitPlacement()
    if name == "tetris":
        return TetrisPlacement()
    raise InputError("--placement", f"unknown placement {name!r} (known: {', '.join(PLACEMENTS)})")


def make_policy(name: str, *, seed: int = 0, V: float = DEFAULT_V, eps: float = DEFAULT_EPS,
                lam: float = DEFAULT_LAMBDA, ga: bool = True,
                las_thresholds: tuple[float, ...] = DEFAULT_LAS_THRESHOLDS,
                trace_every: float = 0.0, placement: str | None = None, k: str = DEFAULT_K,
                estimate_error: float = 0.0, preempt_cost_s: float | None = None):
    """A fresh policy object (policies keep per-run state: make one per run).
    ``placement`` swaps the policy's own placement for another (Blox-style), e.g. fifo
    with Liquid best fit to separate the effect of ordering from that of placement."""
    def placer(default: str):
        return make_placement(placement or default, lam)
    if name == "lyapunov":
        pol = LyapunovPolicy(V=V, eps=eps, lam=lam, seed=seed, ga=ga, trace_every=trace_every,
                             k=k)
        if placement:
            pol.placer = placer("best-fit")
            pol.ga = pol.ga if placement == "best-fit" else None
        return pol
    if name == "single":
        return FixedCountPolicy("single", lambda job: 1, placer("best-fit"))
    if name == "random":
        return FixedCountPolicy("random", _random_count(seed), placer("best-fit"),
                                clamp=True)
    if name == "fifo":
        return FixedCountPolicy("fifo", requested_gpus, placer("first-fit"))
    if name == "tetris":
        return FixedCountPolicy("tetris", requested_gpus, placer("tetris"), backfill=True)
    if name == "las":
        pol = LasPolicy(las_thresholds)
        pol.placer = placer("first-fit")
        return pol
    if name == "sluice":
        from job_scheduler.policies.sluice import DEFAULT_PREEMPT_COST_S, SluicePolicy
        pol = SluicePolicy(lam=lam, seed=seed, estimate_error=estimate_error,
                           preempt_cost_s=(DEFAULT_PREEMPT_COST_S if preempt_cost_s is None
                                           else preempt_cost_s))
        pol.placer = placer("best-fit")
        return pol
    raise InputError("--policies", f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})")


def parse_policy_names(text: str) -> list[str]:
    """``"lyapunov,fifo"`` -> names, rejecting unknown or empty ones before any run."""
    names = [n.strip() for n in text.split(",")]
    if not names or any(not n for n in names):
        raise InputError("--policies", f"empty policy name in {text!r}")
    for n in names:
        if n not in POLICY_NAMES:
            raise InputError("--policies", f"unknown policy {n!r} (known: {', '.join(POLICY_NAMES)})")
    return list(dict.fromkeys(names))
