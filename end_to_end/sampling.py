"""The run loop's sampling hook: what an experiment measures as a run goes (the
heavy-tail's CPU wait, RTO time and egress queues), without subclassing the loop."""

from __future__ import annotations

from typing import Any, Mapping, Protocol


class RunSampler(Protocol):
    def on_turn(self, now: float, running: Mapping[str, Any]) -> None:
        """Each loop turn, after the running jobs (name -> the loop's running job) were
        watched."""

    def on_job_end(self, name: str, job: Any) -> dict:
        """A job has ended, its processes not yet stopped: fields for its record."""


class NoSampling:
    """The default: nothing measured beyond the run's own record."""

    def on_turn(self, now: float, running: Mapping[str, Any]) -> None:
        return None

    def on_job_end(self, name: str, job: Any) -> dict:
        return {}
