"""``las``: Tiresias' discretized two-dimensional least-attained-service, preemptive,
at the requested GPU count, first-fit placement."""

from __future__ import annotations

import heapq
import math

from job_scheduler.core.fit_index import FitIndex
from job_scheduler.core.placement import FirstFitPlacement
from job_scheduler.core.policies.base import Policy, PolicyOptions, requested_gpus

# Tiresias 2D-LAS: one threshold (GPU-seconds of attained service) = two queues,
# Tiresias' own default queue limit.
DEFAULT_LAS_THRESHOLDS = (3600.0,)


class LasPolicy(Policy):
    """Discretized two-dimensional least-attained-service (Tiresias): attained service
    = GPUs x seconds run; a job's queue is the number of thresholds it has passed;
    lower queues first, FIFO (arrival) inside a queue. At every decision the jobs that
    fit in priority order run, the rest are preempted (progress kept; no checkpoint
    overhead is charged). Fixed GPU count (the trace's), first-fit placement.

    Event-driven: the order only changes when a job arrives, ends or a running job
    crosses a threshold, so the policy asks the simulator to wake it at the next
    crossing (``next_wakeup``) instead of every slot, and keeps waiting and running
    jobs in :class:`~job_scheduler.core.fit_index.FitIndex` lists (one per GPU count). A
    decision then costs O(started + running) when a preemption is possible and
    O(started x GPU counts) otherwise, never O(queue): sorting the whole queue every
    slot goes quadratic on the Philly trace
    (bench/results/sluice.md)."""

    name = "las"
    shares_gpus = False     # it time-shares by its own preemption

    def __init__(self, thresholds: tuple[float, ...] = DEFAULT_LAS_THRESHOLDS):
        self.thresholds = tuple(sorted(thresholds))
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

    # wants_slot: the base's False, nothing changes between events but threshold crossings
    def next_wakeup(self, sim) -> float:
        """When the next running job crosses a threshold (its priority drops)."""
        heap = self._cross
        while heap and not self._valid(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def on_training(self, sim, j: int, since: float) -> None:
        """A real job's start-up is not attained service: count from its first batch.
        (A crossing pushed from an infinite start never fires.)"""
        if j in self._since:
            self._since[j] = since
            self._starts[j] += 1            # its pending crossing time is stale
            self._push_crossing(j)

    def on_complete(self, sim, j: int) -> None:
        if j in self._running:
            self._running.remove(j)
        self.on_leave(sim, j)

    def on_leave(self, sim, j: int) -> None:
        if j in self._waiting:
            self._waiting.remove(j)
        for d in (self.attained, self._since, self._level, self._n, self._starts):
            d.pop(j, None)

    def _queue(self, attained: float) -> int:
        return sum(1 for t in self.thresholds if attained >= t)

    def _valid(self, entry) -> bool:
        _, j, k = entry
        return j in self._since and self._starts.get(j) == k

    def _update(self, j: int, now: float) -> None:
        self.attained[j] += self._n[j] * max(now - self._since[j], 0.0)
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
            sim.preempt(j)          # no suspend/resume cost: Tiresias' simulator charges none
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
            # a real job attains nothing before its first batch (t_last inf until
            # on_training): its crossing is then pushed from there
            self._since[j] = now if math.isfinite(sim.running[j].t_last) else math.inf
            self._starts[j] += 1
            self._push_crossing(j)


def make(o: PolicyOptions) -> LasPolicy:
    pol = LasPolicy(o.las_thresholds)
    pol.placer = o.placer("first-fit")
    return pol
