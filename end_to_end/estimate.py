"""How long a job file will take, from C(n), before ``sluice run`` starts it.

The discrete-event simulator runs the file with the same policy and estimator as the
run (``C(n) = Cost(n) + Comm(n)`` from the device profile and the bandwidth of the
placement it gets), which gives each job its GPU count n, its C(n) and the makespan
with queueing. A job
whose C(n) is over :data:`WARN_AFTER_S` gets a warning; the figures are only as good as
the profile (``sluice profile`` on the device makes them the device's own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from job_scheduler.core.estimator import Estimator, batches_for
from sluice_common.jobspec import JobSpec
from topologies import Topology

WARN_AFTER_S = 600.0      # "this job will take longer than 10 minutes"


@dataclass(frozen=True)
class JobEstimate:
    name: str
    gpus: int
    c_n_s: float          # C(n) at the GPU count and placement the policy gives it
    finish_s: float       # start + C(n), from the simulation


@dataclass(frozen=True)
class RunEstimate:
    jobs: tuple[JobEstimate, ...]
    makespan_s: float
    device: str


def estimate_run(jobs: Sequence[JobSpec], topology: Topology, estimator: Estimator,
                 policy_name: str = "lyapunov", batches: int | None = None,
                 price_priority: str | None = None) -> RunEstimate:
    from job_scheduler.core.policies import make_policy
    from job_scheduler.simulation.simulator import Simulator

    sim = Simulator(topology, list(jobs), make_policy(policy_name, price_priority=price_priority),
                    estimator=estimator)
    sim.run()
    out = []
    for k, spec in enumerate(sim.jobs):            # the simulator's (arrival) order
        n = max(1, sim.ran_gpus[k])
        scale = batches_for(spec, n, batches) / batches_for(spec, n)   # --batches
        # C(n) on the placement it got, with the uplink sharing of the jobs beside it
        c_n = (sim.finish[k] - sim.first_start[k]) * scale
        out.append(JobEstimate(spec.name, n, c_n, sim.first_start[k] + c_n))
    makespan = max((j.finish_s for j in out), default=0.0)
    return RunEstimate(tuple(sorted(out, key=lambda j: j.name)), makespan, estimator.device)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def describe(estimate: RunEstimate, limit: float = WARN_AFTER_S) -> list[str]:
    """The lines ``sluice run`` prints before it starts."""
    lines = [f"estimate from C(n) (profile '{estimate.device}'): about "
             f"{_minutes(estimate.makespan_s)} for {len(estimate.jobs)} job(s)"]
    for j in estimate.jobs:
        lines.append(f"  {j.name:<20} {j.gpus:>2} GPU(s)  C(n) {_minutes(j.c_n_s):>9}")
    for j in (j for j in estimate.jobs if j.c_n_s > limit):
        lines.append(f"warning: job '{j.name}' is estimated at {_minutes(j.c_n_s)} (over "
                     f"{_minutes(limit)}); lower epochs/dataset_size or pass --batches N")
    return lines

