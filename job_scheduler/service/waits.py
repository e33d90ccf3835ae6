"""The scheduler service's answer to "why does my job wait, and when will it start":
the inputs of :func:`wait_forecast.dry_run` taken from the service, one forecast per
slot (a GET between two slots reads the cached one), and each job's public fields.

Per job (``GET /jobs``, ``GET /jobs/ID``, ``sluice jobs``):

- queued (or suspended): ``reason`` ``{"code", "message"}`` (codes:
  ``wait_forecast.REASON_CODES``), ``position`` (1-based, in the order the policy's dry
  run starts the queue) and ``estimated_start`` (Unix s; None beyond the forecast);
- running: ``estimated_end`` (the simulated executor's end, else its start plus the
  predicted C(n)), and ``reason`` ``{"code": "slurm", ...}`` while Slurm keeps its
  job PENDING (Slurm's own reason from ``squeue``), else null;
- ended: ``reason`` stays the text of how it ended (a failure's cause, ``cancelled``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from contextlib import suppress

from job_scheduler.core.decisions import QueuedJob
from job_scheduler.service.gpu_records import recorded_placement
from job_scheduler.service import wait_forecast
from job_scheduler.service.wait_forecast import Arrival, Forecast, Held

LOCK_WAIT_S = 0.2      # a read waits this long for a slot in progress, then serves the last


class Waits:
    """The forecast of one service, cached per (slot, queue change)."""

    def __init__(self, svc, max_slots: int = wait_forecast.MAX_SLOTS,
                 max_jobs: int = wait_forecast.MAX_JOBS,
                 max_seconds: float = wait_forecast.MAX_SECONDS):
        self.svc = svc
        self.max_slots, self.max_jobs, self.max_seconds = max_slots, max_jobs, max_seconds
        self._lock = threading.Lock()          # one dry run at a time
        self._key = None
        self._forecast: Forecast | None = None
        self._codes: Counter | None = None
        self._codes_of: Forecast | None = None

    def forecast(self) -> Forecast | None:
        """This slot's forecast (taken now when the slot or the queue changed since).
        A read never waits for a slot in progress (one that suspends a real job waits
        for its checkpoint): while the scheduling loop holds the service, the last
        forecast is served (None before the first)."""
        svc = self.svc
        with self._lock:
            if not svc.slot_lock.acquire(timeout=LOCK_WAIT_S):
                return self._forecast
            try:
                # the dry run's first slot is the service's next one (no slot yet: now)
                at = (svc.last_slot_at if svc.last_slot_at is not None
                      else svc.clock() - svc.policy.slot)
                svc.sync_queue(at)
                key = (svc.ticks, svc.queue_changes)
                if key == self._key and self._forecast is not None:
                    return self._forecast
                running = svc.store.jobs(["running"])
                state, problems = svc.held_state(running)
                step = wait_forecast.clone_step(svc.policy)
                queued, delayed = svc.waiting()
                records = {**{j.id: j for j in running}, **queued, **delayed}
            finally:
                svc.slot_lock.release()
            held = {j.id: self._held(j, step, at) for j in running if j.id not in problems}
            arrivals = [Arrival(QueuedJob(j.id, j.spec, j.start_not_before), j.start_not_before,
                                (j.resume or {}).get("work_left", 1.0),
                                (j.resume or {}).get("restore_s", 0.0))
                        for j in delayed.values()]
            fc = wait_forecast.dry_run(step, state, at, held, arrivals,
                                       self._run_seconds(records), max_slots=self.max_slots,
                                       max_jobs=self.max_jobs, max_seconds=self.max_seconds)
            for j, h in held.items():
                if h.end is not None:
                    fc.ends[j] = h.end
            self._key, self._forecast, self._codes = key, fc, None
            return fc

    def _held(self, job, step, at: float) -> Held:
        placement = recorded_placement(job)[0]
        end = job.expected_end
        if end is None:                # a real job: its start plus the predicted C(n)
            c_n = ((job.placement or {}).get("notes") or {}).get("C_n")
            resume = job.resume or {}
            if c_n is not None and job.started_at is not None:
                end = (job.started_at + float(resume.get("restore_s", 0.0))
                       + float(c_n) * float(resume.get("work_left", 1.0)))
        if end is not None:
            end = max(end, at)         # past its prediction: taken as ending next slot
        return Held(placement, end, job.started_at)

    def _run_seconds(self, records: dict):
        svc = self.svc
        executor = svc.executors[svc.executor]

        def seconds(j, decision, t, work_left, restore_s):
            job = records.get(j)
            if job is None or getattr(executor, "kind", None) != "simulated":
                return None               # the policy's predicted C(n) (dry_run)
            if work_left is not None:     # suspended in the dry run
                job = dataclasses.replace(job, resume={**(job.resume or {}),
                                                       "work_left": work_left,
                                                       "restore_s": restore_s or 0.0})
            with suppress(Exception):     # the simulated executor's plan is arithmetic
                return executor.plan(job, decision, t)["expected_end"] - t
            return None
        return seconds

    # ---- per job ----------------------------------------------------------------------
    def public(self, record, fc: Forecast | None = None, now: float | None = None) -> dict:
        """The job's public fields (``to_public``) with its wait reason and estimates."""
        out = record.to_public()
        out.update(position=None, estimated_start=None, estimated_end=None)
        if record.state == "queued":
            fc = fc if fc is not None else self.forecast()
            fc = fc if fc is not None and record.id in fc.needs else None
            now = self.svc.clock() if now is None else now
            out["reason"] = wait_forecast.wait_reason(record, fc, now)
            if fc is not None:
                out["position"] = fc.position(record.id)
                out["estimated_start"] = fc.starts.get(record.id)
        elif record.state == "running":
            fc = fc if fc is not None else self.forecast()
            out["reason"] = wait_forecast.slurm_reason(record)
            out["estimated_end"] = (fc.ends if fc is not None else {}).get(
                record.id, record.expected_end)
        return out

    def public_many(self, records) -> list[dict]:
        live = any(r.state in ("queued", "running") for r in records)
        fc = self.forecast() if live else None
        now = self.svc.clock()
        return [self.public(r, fc, now) for r in records]

    def queued_by_reason(self) -> dict[str, int]:
        """Waiting jobs per reason code (every code, 0 where none): the queued jobs,
        and the running ones Slurm keeps PENDING (``slurm``)."""
        fc = self.forecast()
        if self._codes is None or fc is not self._codes_of:
            self._codes_of = fc
            now = self.svc.clock()
            codes = Counter()
            for job in self.svc.store.jobs(["queued", "running"]):
                if job.state == "queued":
                    known = fc if fc is not None and job.id in fc.needs else None
                    codes[wait_forecast.wait_reason(job, known, now)["code"]] += 1
                elif wait_forecast.slurm_reason(job) is not None:
                    codes["slurm"] += 1
            self._codes = codes
        return {code: self._codes.get(code, 0) for code in wait_forecast.REASON_CODES}
