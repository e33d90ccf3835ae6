"""Relaying a running job's progress to the controller from the scheduler's host: one
relay for every executor whose jobs' workers may not reach the controller themselves
(``Executor.relays_progress``: the Slurm executor's); the service drives it
(:class:`ProgressRelays`: started at launch, stepped at each poll, dropped at the end)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping

log = logging.getLogger("sluice.scheduler.relay")


class ProgressRelay:
    """Relays a running job's progress (the last batch each worker logged in the shared
    run directory) to the controller from the scheduler's host, with the job's token.

    The workers report themselves when the controller's URL is reachable from the
    nodes; where it is not (a controller API on the scheduler's loopback, as on the
    emulated fabric) this keeps the controller's progress ranking fed. Latest batch
    wins at the controller, so reports from both are harmless. In memory only (the
    token is never stored): after a restart of the service the workers' own reports
    remain."""

    def __init__(self, url: str, token: str, job_id: str, run_dir: Path, workers: int):
        from controller.client import ControllerClient
        from ps_runtime.launcher import LineFollower

        self.client = ControllerClient(url, None, timeout=1.0)
        self.token = token
        self.job_id = job_id
        self.followers = {j: LineFollower(run_dir / "ps" / f"worker{j}.log")
                          for j in range(workers)}
        self.sent: dict[int, int] = {}
        self.failed_once = False

    def step(self) -> int:
        from ps_runtime.launcher import parse_batches
        from ps_runtime.plan import worker_id

        sent = 0
        for j, follower in self.followers.items():
            batches = [r.batch for r in parse_batches(follower.new_lines())]
            if batches and batches[-1] != self.sent.get(j):
                try:
                    self.client.progress(self.job_id, worker_id(j), batches[-1], self.token)
                    self.sent[j] = batches[-1]
                    sent += 1
                except Exception as err:      # the controller being down stops nothing
                    if not self.failed_once:
                        log.warning("progress relay for %s: %s", self.job_id, err)
                        self.failed_once = True
        return sent


class ProgressRelays:
    """The service's relays, one per running job that has one."""

    def __init__(self) -> None:
        self._relays: dict[int, ProgressRelay] = {}

    def start(self, job, env: Mapping[str, str], workers: int) -> None:
        """Relay ``job``'s progress (its workers' logs under its run directory) when the
        service gave it the controller's URL and a progress token (``env``)."""
        url, token = env.get("SLUICE_CONTROLLER_URL"), env.get("SLUICE_CONTROLLER_JOB_TOKEN")
        if url and token and job.run_dir:
            from job_scheduler.service.controller_link import controller_job_id

            self._relays[job.id] = ProgressRelay(url, token, controller_job_id(job),
                                                 Path(job.run_dir), workers)

    def step(self, job_id: int) -> int:
        relay = self._relays.get(job_id)
        return 0 if relay is None else relay.step()

    def drop(self, job_id: int) -> None:
        self._relays.pop(job_id, None)

    def __contains__(self, job_id: int) -> bool:
        return job_id in self._relays
