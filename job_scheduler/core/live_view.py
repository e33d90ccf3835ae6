"""The ``SchedulingContext`` (job_scheduler/core/decisions.py) of a loop that does not simulate
time itself: the scheduler service's slot (``service.policy_step.PolicyStep``) and the
scheduling loop (``job_scheduler.core.loop``: ``sluice run`` and its dry run). A decision is only recorded here (``plan``); the driver carries
it out. The view is the policy's picture: a job it suspended waits again at once (its
GPUs promised to the plan's next starts, while a real job still stops at a batch
boundary), a job it started runs at once. The driver sets ``state`` each slot from its
own, and ``done`` (a job's work done: the run's slowest worker). C(n) is priced on
``bandwidth_topology``: the topology ("idle" model) or the one the run derives from the
controller's link counters ("measured"); a job's rate is the estimator's 1 / C(n). A
policy that prices with the fabric's priority (``priority_bandwidth``) is priced on the
nominal topology's uplinks with the running jobs of the view instead.
"""

from __future__ import annotations

import math
from collections import Counter

from job_scheduler.core.decisions import SlotPlan, StartDecision, Suspend
from job_scheduler.core.estimator import Estimator, effective_bandwidth
from job_scheduler.core.mechanisms import shared_gpus, stopped
from sluice_common.placement import Placement
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.job_model import JobModel, Pricing, Run
from job_scheduler.core.priority_pricing import placement_flows, uplink_capacities
from sluice_common.jobspec import JobSpec
from topologies import Topology


class LiveView(Pricing):
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
        self.running: dict[int, Run] = {}
        self.ran_gpus: Counter = Counter()
        self.done: dict[int, float] = {}        # fraction of its work a job has done
        self.counts: Counter = Counter()
        self.plan = SlotPlan()
        self._reference_bw: dict[int, float] = {}
        self.uplink_cap = uplink_capacities(topology)    # priority pricing's uplinks

    def add(self, j: int, spec: JobSpec) -> None:
        self.jobs[j] = spec
        self.models[j] = JobModel(spec, self.estimator)
        self.waiting[j] = None

    def live_bandwidth(self, placement: Placement, *args, **kwargs) -> float:
        return effective_bandwidth(self.bandwidth_topology, placement.ps_hosts,
                                   placement.worker_hosts, bus=self.estimator.bus_mbps)

    def base_bandwidth(self, placement: Placement) -> float:
        """The placement's bandwidth on the nominal topology (``reference_bandwidth``)."""
        return effective_bandwidth(self.topology, placement.ps_hosts, placement.worker_hosts,
                                   bus=self.estimator.bus_mbps)

    def remaining(self, j: int) -> float:
        return 1.0 - self.done.get(j, 0.0)

    def placement_flows(self, placement: Placement) -> dict[int, int]:
        """Rack uplink -> number of the placement's worker<->PS flows crossing it."""
        return placement_flows(self.state, placement)

    def link_users(self, r: int) -> list[int]:
        """The running jobs whose flows cross rack uplink ``r`` (priority pricing)."""
        return [k for k, run in self.running.items() if r in run.flows]

    def holds_gpus(self, j: int) -> bool:
        return all(m.holds_gpus(j) for m in self.mechanisms)

    def partner_of(self, j: int) -> int | None:
        return next((p for m in self.mechanisms if (p := m.partner_of(j)) is not None), None)

    def retime(self, j: int) -> None:
        """A real job runs at its own speed: nothing to re-time."""

    def start(self, j: int, placement: Placement) -> None:
        if self.holds_gpus(j):                  # a packed guest takes none
            ids = self.state.allocate(placement)
        else:                                   # it shares its partner's
            ids = shared_gpus(self, j)
        del self.waiting[j]
        bw = self.live_bandwidth(placement)
        run = self.running[j] = Run(j, placement.gpus, placement,
                                    self.placement_flows(placement), bw, 1.0)
        run.rate = 1.0 / self.models[j].C(placement.gpus, bw, self.exchange_path(placement))
        run.t_last = math.inf               # trains from its first batch (the driver says)
        self.ran_gpus[j] = placement.gpus
        self.plan.steps.append(StartDecision(j, placement, ids))

    def preempt(self, j: int, overhead_s: float = 0.0, why: str = "policy") -> None:
        run = self.running.pop(j)
        cost = overhead_s if self.costs is None else self.cost_of(j, run.n)
        if not stopped(self.mechanisms, self, j):    # else a packed partner keeps them
            self.state.release(run.placement)
        self.waiting[j] = None
        self.plan.steps.append(Suspend(j, cost, why))

    def finished(self, j: int, policy) -> None:
        """Job j ended (or its suspension found it done): out of the policy's picture."""
        run = self.running.pop(j, None)
        if run is not None:
            stopped(self.mechanisms, self, j)     # the slot's state is set afresh
            policy.on_complete(self, j)
        elif self.waiting.pop(j, 0) is None:
            policy.on_leave(self, j)
        self.done.pop(j, None)
