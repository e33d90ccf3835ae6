"""A loop that does not simulate time as a ``SchedulingContext`` (job_scheduler/context.py):
what the policies and the mechanisms read and do in the scheduler service's slot
(``service_policy.SimulatorPolicyStep``) and in ``sluice run`` (``end_to_end.runloop``),
the same objects the simulator drives.

A decision is only recorded here (``ctx.plan``, via ``slot.decide_slot``); the driver
carries the plan out. The view is the policy's picture: a job it suspended waits again
at once (its GPUs promised to what the plan starts next, while a real job still stops at
a batch boundary), a job it started runs at once (its launch may wait for those GPUs).
The driver sets ``state`` each slot from its own, so it says which GPUs are free.

Bandwidth: C(n) is priced on ``bandwidth_topology``: the topology itself (the "idle"
model, the service's) or the one the run loop derives from the controller's link
counters (the "measured" model). A running job's progress is what the driver says
(``done``: the run's slowest worker's batches); its rate the estimator's 1 / C(n).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from job_scheduler.decisions import SlotPlan, StartDecision, Suspend
from job_scheduler.estimator import Estimator, effective_bandwidth
from job_scheduler.placement import BestFitPlacement, ClusterState, Placement
from job_scheduler.simulator import JobModel
from sluice_common.jobspec import JobSpec
from topologies import Topology


@dataclass
class RunFacts:
    """What a policy or mechanism reads of a running job (the simulator's ``_Run``)."""
    n: int
    placement: Placement
    bw: float                 # Mbit/s priced at its start
    rate: float               # work per second: 1 / C(n, bw)
    t_last: float             # when its segment's first batch was done (inf: not yet)


class LiveView:
    def __init__(self, topology: Topology, estimator: Estimator, slot: float,
                 mechanisms=(), costs=None):
        self.topology = self.bandwidth_topology = topology
        self.estimator = estimator
        self.slot = slot
        self.mechanisms = tuple(mechanisms)
        self.costs = costs
        self.now = 0.0
        self.state = ClusterState(topology)
        self.decisions = 0
        self.jobs: dict[int, JobSpec] = {}
        self.models: dict[int, JobModel] = {}
        self.waiting: dict[int, None] = {}
        self.running: dict[int, RunFacts] = {}
        self.ran_gpus: Counter = Counter()
        self.done: dict[int, float] = {}        # fraction of its work a job has done
        self.counts: Counter = Counter()
        self.plan = SlotPlan()
        self._reference: dict[int, float] = {}

    def add(self, j: int, spec: JobSpec) -> None:
        self.jobs[j] = spec
        self.models[j] = JobModel(spec, self.estimator)
        self.waiting[j] = None

    # ---- facts --------------------------------------------------------------------------
    def live_bandwidth(self, placement: Placement, *args, **kwargs) -> float:
        return effective_bandwidth(self.bandwidth_topology, placement.ps_hosts,
                                   placement.worker_hosts)

    def reference_bandwidth(self, n: int) -> float:
        """Bandwidth of an n-GPU job best-fit placed on the empty cluster (nominal)."""
        bw = self._reference.get(n)
        if bw is None:
            empty = ClusterState(self.topology)
            p = BestFitPlacement().place(empty, "reference", min(n, empty.total_gpus))
            bw = self._reference[n] = (effective_bandwidth(self.topology, p.ps_hosts,
                                                           p.worker_hosts) if p else math.inf)
        return bw

    def remaining(self, j: int) -> float:
        return 1.0 - self.done.get(j, 0.0)

    def cost_of(self, j: int, gpus: int) -> float:
        return self.costs.total(self.jobs[j].model, gpus) if self.costs else 0.0

    def holds_alone(self, j: int) -> bool:
        return all(m.partner_of(j) is None for m in self.mechanisms)

    def holds_gpus(self, j: int) -> bool:
        return all(m.holds_gpus(j) for m in self.mechanisms)

    def partner_of(self, j: int) -> int | None:
        return next((p for m in self.mechanisms if (p := m.partner_of(j)) is not None), None)

    def retime(self, j: int) -> None:
        """A real job runs at its own speed: nothing to re-time."""

    # ---- actions ------------------------------------------------------------------------
    def start(self, j: int, placement: Placement) -> None:
        if self.holds_gpus(j):                  # a packed guest takes none
            self.state.allocate(placement)
        del self.waiting[j]
        bw = self.live_bandwidth(placement)
        self.running[j] = RunFacts(placement.gpus, placement, bw,
                                   1.0 / self.models[j].C(placement.gpus, bw), math.inf)
        self.ran_gpus[j] = placement.gpus
        self.plan.steps.append(StartDecision(j, placement))

    def preempt(self, j: int, overhead_s: float = 0.0, why: str = "policy") -> None:
        run = self.running.pop(j)
        cost = overhead_s if self.costs is None else self.cost_of(j, run.n)
        self._stopped(j, run)
        self.waiting[j] = None
        self.plan.steps.append(Suspend(j, cost, why))

    def _stopped(self, j: int, run: RunFacts) -> None:
        kept = False
        for m in self.mechanisms:             # every mechanism hears of it
            kept = m.on_stop(self, j) or kept
        if not kept:                          # else a packed partner keeps the GPU
            self.state.release(run.placement)

    def finished(self, j: int, policy) -> None:
        """Job j ended (or its suspension found it done): out of the policy's picture."""
        run = self.running.pop(j, None)
        if run is not None:
            self._stopped(j, run)
            policy.on_complete(self, j)
        elif self.waiting.pop(j, 0) is None:
            policy.on_leave(self, j)
        self.done.pop(j, None)
