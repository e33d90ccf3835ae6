"""Relaying a Slurm job's progress to the controller from the scheduler's host."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("sluice.scheduler.slurm")


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
