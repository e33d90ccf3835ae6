"""What the scheduler service needs from an executor and from the SDN controller.

An executor (registered in :mod:`job_scheduler.service.executor_registry`) runs the
decided jobs on its cluster: local processes, Slurm jobs, or nothing at all (simulated).
"""

from __future__ import annotations

from typing import Mapping, Protocol

from job_scheduler.core.decisions import StartDecision
from job_scheduler.service.executors import Outcome
from job_scheduler.service.store import JobRecord


class Executor(Protocol):
    kind: str

    def plan(self, job: JobRecord, decision: StartDecision, now: float) -> dict: ...
    def launch(self, job: JobRecord, env: Mapping[str, str]) -> dict: ...
    def poll(self, job: JobRecord, now: float) -> Outcome | None: ...
    def stop(self, job: JobRecord) -> None: ...
    # Stop it with a checkpoint (a preemptive policy's Suspend), its GPUs free when this
    # returns: {work_left, checkpoint, suspend_s} or {finished: True} (it ended first).
    def suspend(self, job: JobRecord, now: float) -> dict: ...
    # Fields a poll learned that the job's record lacks (a Slurm job id found again by
    # name after the service died between sbatch and recording it): the service records
    # them, so the store agrees with the cluster.
    def learned(self, job: JobRecord) -> dict: ...
    # Optional: one batched look at the cluster for all of ``running`` before the polls
    # of a slot (Slurm: one squeue for every job, not one per job).
    # def prepare_poll(self, running: Sequence[JobRecord], now: float) -> None: ...
    # Optional: the PS port block the job will listen on, reserved before its launch
    # (which keeps it), so that the controller is told the ports the job uses.
    # def port_block(self, job: JobRecord) -> int: ...


class ControllerLink(Protocol):
    """What the service needs from the SDN controller (``controller.client``)."""

    # ``base_port``: the PS port block the job's executor reserved for it (None: none)
    def job_started(self, job: JobRecord, base_port: int | None = None
                    ) -> Mapping[str, str] | None: ...
    def job_ended(self, job: JobRecord) -> None: ...
