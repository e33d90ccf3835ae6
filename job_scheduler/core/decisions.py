"""The one scheduling-loop contract and what a slot decides, as data.

Every loop drives the same policy objects (``job_scheduler.core.policies``) and
mechanisms (``job_scheduler.core.mechanisms``) through a :class:`SchedulingContext`, each
slot through :func:`decide_slot`: the simulator (``simulator.Simulator``), the scheduler
service (``live_view.LiveView`` in ``service.policy_step.PolicyStep``) and the scheduling
loop of ``job_scheduler.core.loop`` on a ``LiveView`` (the end-to-end run's, on the wall
clock with PS jobs, ``end_to_end.runloop``, and its dry run's, on a virtual clock with
the exchange model, ``end_to_end.model_run``). They differ only in the bandwidth model
behind ``live_bandwidth``:

- ``"idle"``: the placement's bandwidth with the fabric to itself
  (``estimator.effective_bandwidth`` on the topology) -- the service's default;
- ``"shared"``: idle, capped by the job's fair share of every rack uplink it crosses
  with the running jobs' flows -- the simulator's default;
- measured: idle on the topology the run loop derives each slot from the controller's
  link counters (``end_to_end.closed_loop.available_topology``).

A slot's answer is a :class:`SlotPlan`: jobs to start (:class:`StartDecision`) and jobs
to suspend (:class:`Suspend`) in the order taken (a suspension frees the GPUs a later
start uses), as Blox's placement returns jobs to terminate and to launch. The drivers
only carry it out: the simulator at once (costs charged), the service through its
executor, the scheduling loop through its executor. Same bandwidth model, jobs, seed and slot:
the same decisions (tests/unit/job_scheduler/core/test_decisions.py and
test_decisions_one_engine.py). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from job_scheduler.core.cluster_state import ClusterState
from sluice_common.jobspec import JobSpec
from sluice_common.placement import GpuGrant, Placement

BANDWIDTH_MODELS = ("shared", "idle")


@dataclass(frozen=True)
class QueuedJob:
    id: int
    spec: JobSpec
    submitted_at: float


@dataclass(frozen=True)
class StartDecision:
    """A policy's answer for one queued job: start it now, on this placement, on these
    GPU indices of each host (``gpu_ids``: what the loop's ``start`` allocated; None
    where a policy answers without a loop, and the driver takes the lowest free)."""
    job_id: int
    placement: Placement
    gpu_ids: GpuGrant | None = None
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
                "gpus_by_host": self.gpus_by_host(),
                **({"gpu_ids": self.gpu_ids.as_dict()} if self.gpu_ids is not None else {}),
                **({"notes": self.notes} if self.notes else {})}


@dataclass(frozen=True)
class Suspend:
    """Stop running job ``job_id`` keeping its progress; it waits again. ``cost_s``: the
    suspend + resume seconds it pays, GPUs held without progress, when it starts again;
    ``why``: who asked (``policy``, ``time-slice``, ``migrate``, ``regrow``)."""
    job_id: int
    cost_s: float = 0.0
    why: str = "policy"


@dataclass
class SlotPlan:
    """One slot's decisions: ``steps`` in the order taken, each a StartDecision or a
    Suspend (``starts`` and ``suspends`` are the two kinds apart)."""
    steps: list = field(default_factory=list)

    @property
    def starts(self) -> list[StartDecision]:
        return [s for s in self.steps if isinstance(s, StartDecision)]

    @property
    def suspends(self) -> list[Suspend]:
        return [s for s in self.steps if isinstance(s, Suspend)]

    def lines(self, names) -> list[str]:
        """The plan as text, one step a line (``names``: job key -> name)."""
        out = []
        for s in self.steps:
            if isinstance(s, Suspend):
                out.append(f"suspend {names[s.job_id]} ({s.why}, cost {s.cost_s:g} s)")
            else:
                ids = "" if s.gpu_ids is None else " GPUs " + " ".join(
                    f"{h}:{','.join(map(str, v))}" for h, v in s.gpu_ids.by_host)
                out.append(f"start {names[s.job_id]}: {s.gpus} GPU(s) on "
                           f"{','.join(s.worker_hosts)} (PS {','.join(s.ps_hosts)}){ids}")
        return out


class JobFigures(Protocol):
    """A job's estimator figures: Cost(1) and C(n) at a bandwidth (Mbit/s)."""
    cost1: float

    def C(self, n: int, bw: float) -> float: ...


@runtime_checkable
class SchedulingContext(Protocol):
    now: float                          # seconds, at a slot boundary
    slot: float                         # seconds between decisions
    state: ClusterState                 # free GPUs (and indices) per host; a policy allocates on it
    jobs: Mapping[int, JobSpec] | list  # job key -> its description
    models: Mapping[int, JobFigures] | list
    waiting: dict[int, None]            # queued job keys, FIFO (arrival) order
    decisions: int                      # GPU-count decisions taken (a counter policies bump)
    running: Mapping[int, Any]          # job key -> its job_model.Run (n, placement, rate...)
    plan: SlotPlan                      # what this slot has decided so far

    def live_bandwidth(self, placement: Placement, *args, **kwargs) -> float:
        """Mbit/s the placement would get now, under the loop's bandwidth model."""

    def start(self, j: int, placement: Placement) -> None:
        """Start queued job ``j`` on ``placement`` (the loop allocates its GPUs)."""

    def preempt(self, j: int, overhead_s: float = 0.0, why: str = "policy") -> None:
        """Suspend running job ``j`` (progress kept; it waits again; a Suspend)."""


def decide_slot(ctx, policy, mechanisms: Sequence = ()) -> SlotPlan:
    """One slot of any loop; ``ctx.start`` and ``ctx.preempt`` record each step into
    ``ctx.plan``. While jobs wait: the mechanisms' ``before_step`` (time-slicing frees
    GPUs), the policy's ``step``, the mechanisms' ``after_step`` (packing); when nothing
    waits and GPUs are idle: the policy's ``regrow`` (sluice resizes running jobs); when
    nothing waits and nothing runs: the policy's ``idle`` for this slot (lyapunov: Z
    decays). A loop that skips slots calls ``idle`` for the skipped ones on the same
    condition, so every loop ages the policy alike."""
    plan = ctx.plan = SlotPlan()
    if ctx.waiting:
        for m in mechanisms:
            m.before_step(ctx, policy)
        policy.step(ctx)
        for m in mechanisms:
            m.after_step(ctx, policy)
    if not ctx.waiting and ctx.state.total_free and ctx.running:
        policy.regrow(ctx)
    if not ctx.waiting and not ctx.running:
        policy.idle(ctx, 1)
    return plan
