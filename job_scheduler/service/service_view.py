"""The scheduler service's picture of its jobs for a preemptive policy (``las``,
``sluice``): the simulator's picture, slot by slot.

A ``LiveView`` (job_scheduler/core/live_view.py) that keeps the running jobs (a
preemptive policy chooses its victims among them) and prices their progress as the
simulator does (``Simulator(bandwidth="idle", costs=None)``): a job trains from its
start plus the restore it pays (the seconds its last suspension's asker named), at
1 / C(n) of its work per second; a suspended job keeps the work it has left. A trace
job's work is calibrated on its trace duration as the simulator calibrates it. A real
job's executor may measure its progress (``observe``): the picture then starts from it. Jobs are
shown to the policy under their service id (placements name ``str(id)``, as the
service's cluster state does), so a policy that releases a running job's GPUs releases
the ones the store records. Pure.
"""

from __future__ import annotations

import dataclasses

from job_scheduler.core.job_model import JobModel
from job_scheduler.core.live_view import LiveView
from sluice_common.placement import Placement
from sluice_common.jobspec import JobSpec


class ServiceView(LiveView):
    def __init__(self, topology, estimator, slot: float):
        super().__init__(topology, estimator, slot)
        self.work_left: dict[int, float] = {}    # waiting jobs that ran: fraction left
        self.restore_s: dict[int, float] = {}    # seconds a resumed job pays first
        self.names: dict[int, str] = {}          # job key -> the user's job name

    def add(self, j: int, spec: JobSpec, work_left: float = 1.0,
            restore_s: float = 0.0) -> None:
        self.names[j] = spec.name
        spec = dataclasses.replace(spec, name=str(j))
        self.jobs[j] = spec
        self.models[j] = JobModel(spec, self.estimator, self.reference_bandwidth,
                                  self.reference_path)
        self.waiting[j] = None
        if work_left < 1.0:
            self.work_left[j] = work_left
        if restore_s:
            self.restore_s[j] = restore_s

    def remaining(self, j: int) -> float:
        run = self.running.get(j)
        if run is None:
            return self.work_left.get(j, 1.0)
        return max(run.work_left - max(self.now - run.t_last, 0.0) * run.rate, 0.0)

    def start(self, j: int, placement: Placement) -> None:
        super().start(j, placement)
        run = self.running[j]
        run.work_left = self.work_left.pop(j, 1.0)
        run.t_last = self.now + self.restore_s.pop(j, 0.0)   # no progress while restoring

    def preempt(self, j: int, overhead_s: float = 0.0, why: str = "policy") -> None:
        left = self.remaining(j)
        super().preempt(j, overhead_s, why)
        self.work_left[j] = left
        self.restore_s[j] = self.plan.steps[-1].cost_s

    def observe(self, j: int, work_left: float) -> None:
        """A real job's work left as its executor measured it (its workers' batches):
        its progress from now on is counted from there (a restore still in progress
        stays)."""
        run = self.running.get(j)
        if run is not None:
            run.work_left = min(max(work_left, 0.0), 1.0)
            run.t_last = max(run.t_last, self.now)

    def user_placement(self, j: int, placement: Placement) -> Placement:
        """The placement named by the user's job name (as the simulator names it)."""
        return dataclasses.replace(placement, job=self.names.get(j, placement.job))

    def drop(self, j: int) -> None:
        """Job j left the service's picture for good."""
        for d in (self.jobs, self.models, self.running, self.work_left, self.restore_s,
                  self.names, self.done):
            d.pop(j, None)
        self.waiting.pop(j, None)
