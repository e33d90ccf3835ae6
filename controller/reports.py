"""Progress reports, the controller's hot path: check, record, journal, group commit.

A report is checked and recorded under the small report lock only (so reports go on
while a reconcile holds the shared lock); the job, its credential, the worker and the
batch are judged there, and the rate limit is charged there too, after them: a job
removed and registered again meanwhile (a new token) never gets a report made with the
old one, and a refused report uses up no rate. One reconcile then covers every report
recorded before it started (group commit).
"""

from __future__ import annotations

import hmac
import threading
from typing import Any, Callable

from controller.errors import BadRequest, NotFound, Refused, Unauthorized, Unprocessable
from sluice_common.tokens import token_refusal
from controller.hinting import Hints
from controller.persistence import StateStore
from controller.reconcile import Reconciler
from controller.registry import parse_progress
from controller.report_hints import Hint
from controller.state import Shared
from sluice_common.errors import InputError, RuleBroken

Answer = tuple[dict[str, Any], threading.Event | None]


class PendingReport:
    """An accepted progress report waiting for the reconcile that covers it."""
    __slots__ = ("t0", "done", "changed", "covered", "moved")

    def __init__(self, t0: float, done=None, moved: tuple[str, str] = ("", "")) -> None:
        self.t0, self.done, self.changed, self.covered = t0, done or threading.Event(), 0, False
        self.moved = moved          # (job, worker) whose batch it moved


class Reports:
    def __init__(self, shared: Shared, reconciler: Reconciler, store: StateStore) -> None:
        self.s, self.reconciler, self.store = shared, reconciler, store
        self.hints = Hints(shared, reconciler)
        self.reconcile_lock = threading.Lock()     # group commit of progress reports
        self._pending: list[PendingReport] = []
        self._unjournaled: list[tuple[str, str, int]] = []   # recorded, not yet written

    def progress(self, job_id: str, body: Any, t0: float | None = None,
                 done: threading.Event | None = None, credential: str | None = None,
                 admit: Callable[[str], None] | None = None) -> Answer:
        mine, who = self._record(job_id, body, t0, done, credential, admit)
        self._write_journal()
        if isinstance(mine, PendingReport):
            self._commit(mine)
        return self._answer(mine, self._hints([who])[0])

    def progress_many(self, reports: list[tuple[str, Any, float, threading.Event | None,
                                                str | None]],
                      admit: Callable[[str], None] | None = None) -> list[Answer | Refused]:
        recorded: list[tuple[PendingReport | str, tuple[str, str]] | Refused] = []
        for job_id, body, t0, done, credential in reports:
            try:
                recorded.append(self._record(job_id, body, t0, done, credential, admit))
            except Refused as err:
                recorded.append(err)
        self._write_journal()
        last = next((r[0] for r in reversed(recorded)
                     if not isinstance(r, Refused) and isinstance(r[0], PendingReport)), None)
        if last is not None:        # covers every report recorded before it
            self._commit(last)
        hints = iter(self._hints([r[1] for r in recorded if not isinstance(r, Refused)]))
        return [r if isinstance(r, Refused) else self._answer(r[0], next(hints))
                for r in recorded]

    def _hints(self, who: list[tuple[str, str]]) -> list[Hint | None]:
        """The hint of each (job, worker) that reported, on the state after the reconcile
        that covered them (one lock round for all)."""
        if not self.s.config.report_hints or not who:
            return [None] * len(who)
        with self.s.lock:
            with self.s.report_lock:
                return [self.hints.of(job_id, worker) for job_id, worker in who]

    def _record(self, job_id: str, body: Any, t0: float | None,
                done: threading.Event | None, credential: str | None = None,
                admit: Callable[[str], None] | None = None
                ) -> tuple[PendingReport | str, tuple[str, str]]:
        """Check and record one report: the pending report waiting for its reconcile,
        or the result of a report that changes nothing (stale); and (job, worker)."""
        s = self.s
        t0 = s.clock() if t0 is None else t0
        # The checks are made under the report lock too: registering or removing a job
        # takes it, so the job a report is checked against is the job it is recorded on.
        with s.report_lock:
            job = s.registry.jobs.get(job_id)
            if job is None:
                raise NotFound(f"no job '{job_id}'")
            if credential is not None and not (
                    credential and hmac.compare_digest(credential, s.credentials[job_id])):
                raise Unauthorized(token_refusal(
                    credential, f"job '{job_id}''s token",
                    "the `token` of the job's registration; each registration makes a new one"),
                    token_given=bool(credential))
            try:
                worker, batch = parse_progress(body, job)
            except InputError as err:
                s.metrics.inc("sluice_progress_reports_total", result="rejected")
                if isinstance(err, RuleBroken):       # a worker the job does not have
                    raise Unprocessable(str(err), err.field)
                raise BadRequest(str(err))
            if admit is not None:
                admit(job_id)          # the rate limit: only admissible reports use it up
            result = s.registry.report(job_id, worker, batch)
            s.metrics.inc("sluice_progress_reports_total", result=result)
            if result == "accepted" and self.store.journal is not None:
                # written (_write_journal) before the answer leaves: a SIGKILL after the
                # ack loses nothing
                self._unjournaled.append((job_id, worker, batch))
            if result != "accepted":
                return result, (job_id, worker)
            mine = PendingReport(t0, done, (job_id, worker))
            self._pending.append(mine)
            return mine, (job_id, worker)

    def _write_journal(self) -> None:
        """Journal what was recorded, in one write; returns once the reports this thread
        recorded are written (by it or by a thread that got there first)."""
        if self.store.journal is not None:
            with self.s.report_lock:
                lines, self._unjournaled = self._unjournaled, []
                self.store.journal.append_many(lines)

    def _commit(self, mine: PendingReport) -> None:
        """Group commit: one reconcile covers every report recorded before it started.
        Under load, reports arriving while a reconcile runs are covered together by the
        next one, so the cost per report falls as the rate rises; alone, a report gets
        its own reconcile at once."""
        with self.reconcile_lock:
            if not mine.covered:         # else a reconcile that started after it ran
                with self.s.lock:
                    with self.s.report_lock:
                        batch, self._pending = self._pending, []
                    if batch:
                        self._reconcile_batch(batch)
                    self.store.compact_if_due()

    def _reconcile_batch(self, batch: list[PendingReport]) -> None:
        s = self.s

        def finished() -> None:
            now = s.clock()
            for p in batch:
                s.metrics.observe_reaction(now - p.t0)
                p.done.set()

        mods = self.reconciler.moved({p.moved for p in batch}, on_done=finished)
        if mods is None:        # no incremental state to build on: the full reconcile
            mods = self.reconciler.full(on_done=finished, only_if_levels_changed=True)
        for p in batch:
            p.changed, p.covered = len(mods), True
        if len(batch) > 1:
            s.metrics.inc("sluice_progress_reports_coalesced_total", len(batch) - 1)

    @staticmethod
    def _answer(mine: PendingReport | str, hint: Hint | None) -> Answer:
        # "report": when the worker's next report matters (absent with hints off)
        extra = {} if hint is None else {"report": hint.to_json()}
        if isinstance(mine, str):
            return {"result": mine, "changed_rules": 0, **extra}, None
        if not mine.changed:
            return {"result": "accepted", "changed_rules": 0, **extra}, None
        return {"result": "accepted", "changed_rules": mine.changed, **extra}, mine.done
