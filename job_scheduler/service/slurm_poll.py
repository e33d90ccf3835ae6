"""One batched look at Slurm per poll interval, for all of sluice's running jobs.

A site throttles an account that asks slurmctld once per job per second. So the Slurm
executor asks once per *poll* (``--slurm-poll-interval``, apart from the decision slot):
ONE ``squeue --jobs=ID,ID,...`` for every running job, and ONE ``sacct --jobs=...`` for
those squeue no longer shows (purged after ``MinJobAge``: slurmdbd's record says how
they ended). Between polls the running jobs are taken as still running and no Slurm
command runs for them. :class:`PollRounds` keeps the last answer. Slurm unreachable:
every job is taken as still running; a batched query Slurm refuses (or that sluice
cannot read): that poll asks job by job, so one job's error stays that job's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from job_scheduler.service.executors import Outcome
from job_scheduler.service.run_files import error_text
from slurm_client import JobInfo, ParseError, SlurmError, SlurmUnavailable, job_outcome

log = logging.getLogger("sluice.scheduler.slurm")


def by_leader(parts: list[JobInfo]) -> dict[int, list[JobInfo]]:
    out: dict[int, list[JobInfo]] = {}
    for p in parts:
        out.setdefault(p.leader, []).append(p)
    return out


@dataclass
class Snapshot:
    at: float
    asked: frozenset[int]                                   # Slurm ids asked this round
    parts: dict[int, list[JobInfo]] = field(default_factory=dict)      # squeue
    accounted: dict[int, list[JobInfo]] = field(default_factory=dict)  # sacct
    error: Exception | None = None                          # the batched query's, if any


class PollRounds:
    """``begin`` at most once per ``interval`` seconds runs the batched queries."""

    def __init__(self, client, interval: float):
        self.client = client
        self.interval = interval
        self.snapshot: Snapshot | None = None
        self.fresh = False          # this slot began a round (its answers are new)
        self.active = False         # the service calls begin() (else: per-job queries)
        self.accounting = True      # sacct answers (False: a cluster without slurmdbd)

    def due(self, now: float) -> bool:
        return self.snapshot is None or now - self.snapshot.at >= self.interval

    def begin(self, ids: set[int], now: float) -> bool:
        """A new round when one is due: True (then ``fresh``)."""
        self.active = True
        self.fresh = self.due(now)
        if not self.fresh:
            return False
        snap = Snapshot(now, frozenset(ids))
        try:
            if ids:
                snap.parts = by_leader([p for p in self.client.jobs(ids)])
            missing = set(ids) - set(snap.parts)
            if missing and self.accounting:
                snap.accounted = self._sacct(missing)
        except SlurmUnavailable as err:          # every job: still running
            snap.error = err
        except (SlurmError, ParseError) as err:  # refused or unreadable: ask each job
            log.warning("batched Slurm query failed (%s): asking job by job this poll", err)
            snap = Snapshot(now, frozenset())    # alone, so one job's error stays its own
        self.snapshot = snap
        return True

    def _sacct(self, ids: set[int]) -> dict[int, list[JobInfo]]:
        try:
            return by_leader(self.client.accounted(ids))
        except SlurmUnavailable:
            raise
        except SlurmError as err:     # e.g. "Slurm accounting storage is disabled"
            log.warning("sacct unusable (%s): purged jobs are judged by their exit file", err)
            self.accounting = False
            return {}

    def parts(self, slurm_id: int) -> list[JobInfo] | None:
        """This round's parts of the job ([] if squeue lacks it); None: not asked this
        round (ask it alone). Raises the batched query's error."""
        snap = self.snapshot
        if not (self.active and self.fresh and snap and slurm_id in snap.asked):
            return None
        if snap.error is not None:
            raise snap.error
        return snap.parts.get(slurm_id, [])

    def accounted(self, slurm_id: int) -> list[JobInfo] | None:
        snap = self.snapshot
        if not (self.active and self.fresh and snap and slurm_id in snap.asked):
            return None
        return snap.accounted.get(slurm_id, [])


def accounted_end(acct: list[JobInfo], slurm_id: int, code: int | None, run_dir: Path,
                  now: float) -> Outcome | None:
    """How a job slurmctld no longer knows ended, by Slurm's accounting (``acct``: its
    sacct records): one that ended there ended, whatever its exit file says or lacks,
    and is never run again as if lost. None: sacct has no end for it."""
    if not acct or not all(p.terminal for p in acct):
        return None
    verdict, words = job_outcome(acct)
    if verdict == "completed" and code is None and all(p.exit_code in ("0:0", None)
                                                       for p in acct):
        return Outcome("finished", now, 0, f"Slurm job {slurm_id} COMPLETED (sacct); its "
                       "exit file is missing")
    reason = f"Slurm job {slurm_id} {words} (sacct)"
    if code is not None:
        reason += f"; {error_text(run_dir, code)}"
    return Outcome("failed", now, code, reason)
