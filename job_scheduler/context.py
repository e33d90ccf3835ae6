"""The one scheduling-loop contract: what a policy (``job_scheduler.policies``) may read
and do, whichever loop drives it.

Three loops drive the same policy objects (and mechanisms) through this context, each
slot through ``slot.decide_slot``: the simulator (``simulator.Simulator``), the
scheduler service (``live_view.LiveView`` in ``service_policy.SimulatorPolicyStep``) and
the end-to-end run (a ``LiveView`` in ``end_to_end.runloop``). They differ only in the
bandwidth model behind ``live_bandwidth``:

- ``"idle"``: the placement's bandwidth with the fabric to itself
  (``estimator.effective_bandwidth`` on the topology) -- the service's default;
- ``"shared"``: idle, capped by the job's fair share of every rack uplink it crosses
  with the running jobs' flows -- the simulator's default;
- measured: idle on the topology the run loop derives each slot from the controller's
  link counters (``end_to_end.closed_loop.available_topology``).

With the same bandwidth model, job file, seed and slot, the simulator and the service
make the same decisions (tests/test_loop_contract.py).
"""

from __future__ import annotations

from typing import Mapping, Protocol, runtime_checkable

from job_scheduler.placement import ClusterState
from sluice_common.jobspec import JobSpec
from sluice_common.placement import Placement

BANDWIDTH_MODELS = ("shared", "idle")


class JobFigures(Protocol):
    """A job's estimator figures: Cost(1) and C(n) at a bandwidth (Mbit/s)."""
    cost1: float

    def C(self, n: int, bw: float) -> float: ...


@runtime_checkable
class SchedulingContext(Protocol):
    now: float                          # seconds, at a slot boundary
    slot: float                         # seconds between decisions
    state: ClusterState                 # free GPUs per host (a policy allocates on it)
    jobs: Mapping[int, JobSpec] | list  # job key -> its description
    models: Mapping[int, JobFigures] | list
    waiting: dict[int, None]            # queued job keys, FIFO (arrival) order
    decisions: int                      # GPU-count decisions taken (a counter policies bump)

    def live_bandwidth(self, placement: Placement, *args, **kwargs) -> float:
        """Mbit/s the placement would get now, under the loop's bandwidth model."""

    def start(self, j: int, placement: Placement) -> None:
        """Start queued job ``j`` on ``placement`` (the loop allocates its GPUs)."""
