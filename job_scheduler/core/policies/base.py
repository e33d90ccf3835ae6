"""What every policy is: the ``Policy`` base the scheduling loops drive, the options a
policy is built from, and the pieces several policies share.

``sim`` below is the loop's ``SchedulingContext`` (job_scheduler/core/decisions.py): the
simulator, one slot of the scheduler service, or the service step inside the
end-to-end run. Every hook a loop may call is declared on :class:`Policy` with a no-op
default, so a loop calls them all and a policy overrides the ones it needs (no loop
probes for a method). At each slot boundary, in this order (``decisions.decide_slot``):

* ``on_arrival(sim, j)`` once per job that entered the waiting list;
* ``step(sim)`` when jobs wait: start (``sim.start``) or suspend (``sim.preempt``);
* ``regrow(sim)`` when nothing waits and GPUs are idle (sluice resizes running jobs);
* ``wants_slot(sim)``: must it be called again next slot even if no event happens?
* ``next_wakeup(sim) -> float``: a time before the next event at which the order
  changes (las' threshold crossings);
* ``idle(sim, slots)``: that many slots passed with no call (nothing could change).

Between slots: ``on_training(sim, j, since)`` (a real job's run began training at
``since``, after its start-up: the end-to-end run only; in the simulator a job trains
from its start), ``on_complete(sim, j)`` (a job ended), ``on_leave(sim, j)`` (a queued
job was cancelled: a policy that counted its work takes it out), ``forget(j)`` (the
service drops a job for good). The mechanisms (job_scheduler/core/mechanisms.py) call
``needs(sim, j)`` (GPUs waiting job j needs to start), ``on_requeue(sim, j)`` (running
job j was suspended by time-slicing: it waits again) and ``on_packed(sim, j)`` (waiting
job j was started packed onto a busy GPU); a policy with ``shares_gpus = False`` (las,
which time-shares by its own preemption) refuses time-slicing and packing. A policy's
``trace`` of (t, Q, Z) gets plotted.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Callable

from job_scheduler.core.placement import BestFitPlacement, FirstFitPlacement, TetrisPlacement
from sluice_common.placement import Placement
from job_scheduler.core.proteus import candidate_counts
from job_scheduler.core.slurm_placement import SlurmTreePlacement
from sluice_common.errors import option_error
from sluice_common.jobspec import JobSpec


class Policy:
    """The base of every policy: each hook with its no-op default (module docstring)."""
    name: str = "?"
    shares_gpus: bool = True        # may time-slicing and packing move its jobs?
    trace: tuple = ()               # (t, Q, Z) samples, for the plots (lyapunov's)

    def on_arrival(self, sim, j: int) -> None:
        pass

    def step(self, sim) -> None:
        pass

    def wants_slot(self, sim) -> bool:
        return False

    def idle(self, sim, slots: int) -> None:
        pass

    def next_wakeup(self, sim) -> float:
        return math.inf

    def regrow(self, sim) -> None:
        pass

    def on_training(self, sim, j: int, since: float) -> None:
        pass

    def on_complete(self, sim, j: int) -> None:
        pass

    def on_leave(self, sim, j: int) -> None:
        """``j`` left for good without running again (cancelled, or a real job that
        finished its last batch while it was being suspended)."""

    def forget(self, j: int) -> None:
        pass

    def needs(self, sim, j: int) -> int:
        return 1

    def on_requeue(self, sim, j: int) -> None:
        pass

    def on_packed(self, sim, j: int) -> None:
        pass


class FunctionPolicy(Policy):
    """A plain ``(queued, state, now) -> [StartDecision]`` step (an experiment's fixed
    placement, a test's) as a Policy: it is shown the waiting jobs in queue order
    (``decisions.QueuedJob``) and a scratch copy of the free GPUs."""

    def __init__(self, fn: Callable, name: str = "function"):
        self.fn = fn
        self.name = name

    def step(self, sim) -> None:
        from job_scheduler.core.decisions import QueuedJob
        queued = [QueuedJob(j, sim.jobs[j], sim.jobs[j].arrival) for j in sim.waiting]
        for d in self.fn(queued, sim.state.copy(), sim.now):
            sim.start(d.job_id, d.placement)


@dataclass(frozen=True)
class PolicyOptions:
    """Every knob ``make_policy`` takes; each policy reads the ones it has."""
    seed: int
    lam: float                      # Liquid: weight of rack cost vs fitness
    placement: str | None           # swap the policy's own placement (Blox-style)
    V: float                        # lyapunov
    eps: float                      # lyapunov
    k: str                          # lyapunov: reading of k
    ga: bool                        # lyapunov: group GA for a slot's batch
    las_thresholds: tuple[float, ...]
    estimate_error: float           # sluice
    price_priority: str | None = None   # sluice: price placements under this rule (None: off)

    def placer(self, default: str):
        """The policy's placement strategy: ``default`` unless ``placement`` overrides."""
        name = self.placement or default
        if name not in _PLACERS:
            raise option_error("placement",
                               f"unknown placement {name!r} (known: {', '.join(PLACEMENTS)})")
        return _PLACERS[name](self.lam)


_PLACERS = {"best-fit": BestFitPlacement, "first-fit": lambda lam: FirstFitPlacement(),
            "tetris": lambda lam: TetrisPlacement(),
            # what Slurm's cons_tres + topology/tree would choose (the demo's arms a, b)
            "slurm": lambda lam: SlurmTreePlacement()}
PLACEMENTS = tuple(_PLACERS)


def requested_gpus(job: JobSpec) -> int:
    """What a job asks for: its trace's GPU count for trace jobs, else max_gpus."""
    return job.trace_gpus if job.trace_gpus else job.max_gpus


def candidate_costs(sim, j: int, limit: int, placer, *, place_one: bool = True,
                    price_priority: str | None = None
                    ) -> tuple[dict[int, float], dict[int, Placement]]:
    """C(n) of job ``j`` for every candidate count up to ``limit`` on the placement
    ``placer`` would give it now, priced at the loop's live bandwidth, and those
    placements. C(1) = Cost(1) (no exchange); ``place_one=False`` leaves n = 1 unplaced
    (a caller that places it only if chosen). ``price_priority``: a rule of
    ``sluice_common.rank_rules``; the bandwidth is then the one the job would get in the
    priority class the rule gives it (``sim.priority_bandwidth``,
    job_scheduler/core/priority_pricing.py) instead of the fair share."""
    job, model = sim.jobs[j], sim.models[j]
    costs: dict[int, float] = {}
    places: dict[int, Placement] = {}
    for n in candidate_counts(limit):
        if n == 1 and not place_one:
            costs[1] = model.cost1
            continue
        p = placer.place(sim.state, job.name, n, job.num_ps)
        if p is None:
            continue
        places[n] = p
        if n == 1:
            costs[n] = model.cost1
            continue
        bw = (sim.live_bandwidth(p) if price_priority is None
              else sim.priority_bandwidth(p, j, price_priority))
        costs[n] = model.C(n, bw, sim.exchange_path(p))
    return costs, places


class FixedCountPolicy(Policy):
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

    def forget(self, j: int) -> None:
        """``j`` left the queue for good (the scheduler service says so): a service that
        runs for months must not keep a count per job it ever saw."""
        self._n.pop(j, None)

    # on_requeue/on_packed: the base's no-ops (the queue is sim.waiting itself)
    def needs(self, sim, j: int) -> int:
        return self._n[j]

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
