"""The northbound calls that change the controller: register or remove a job, switch the
ranking rule. Callers are authorised (controller.auth): each call checks the request
against the controller's state only, refuses with controller.errors exceptions and
changes nothing when it refuses; what it changed is installed and saved on return.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sluice_common import rank_rules
from controller.errors import BadRequest, Conflict, NotFound, Unprocessable
from controller.persistence import StateStore
from controller.reconcile import Reconciler
from controller.registry import parse_job
from controller.state import Shared
from sluice_common.errors import InputError, RuleBroken

LOG = logging.getLogger("sluice.controller")


class JobOps:
    def __init__(self, shared: Shared, reconciler: Reconciler, store: StateStore) -> None:
        self.s, self.reconciler, self.store = shared, reconciler, store

    def register_job(self, body: Any, credential: str,
                     done: threading.Event | None = None) -> dict[str, Any]:
        s = self.s
        try:
            job = parse_job(body, s.known_ips)
        except RuleBroken as err:       # the right shape, a rule broken: 422 + field
            raise Unprocessable(str(err), err.field)
        except InputError as err:       # the wrong shape (the request model says 400 first)
            raise BadRequest(str(err))
        with s.lock:
            with s.report_lock:
                try:
                    s.registry.check_new(job)
                except InputError as err:
                    raise Conflict(str(err))
                job.registered_s = s.wall_clock()
                s.registry.add(job)
                self.reconciler.forget_job(job.id)
                s.credentials[job.id] = credential
            s.metrics.inc("sluice_jobs_registered_total")
            self.reconciler.job_added(job, on_done=done.set if done else None)
            snapshot = self.store.capture()
            answer = job.to_dict()
        # on disk before the answer, but with the lock released: reports go on meanwhile
        if snapshot is not None:
            self.store.write_snapshot(*snapshot)
        LOG.info("job %s registered: %d servers, %d workers, cookie 0x%x", job.id,
                 len(job.servers), len(job.workers), job.cookie)
        return answer

    def remove_job(self, job_id: str, done: threading.Event | None = None) -> dict[str, Any]:
        s = self.s
        with s.lock:
            with s.report_lock:
                if job_id not in s.registry.jobs:
                    raise NotFound(f"no job '{job_id}'")
                job = s.registry.remove(job_id)
                self.reconciler.forget_job(job_id)
                s.credentials.pop(job_id, None)
            mods = self.reconciler.job_removed(job, on_done=done.set if done else None)
            snapshot = self.store.capture()
        if snapshot is not None:
            self.store.write_snapshot(*snapshot)
        LOG.info("job %s removed", job_id)
        return {"id": job_id, "removed_rules": sum(
            1 for m in mods if m.command == "delete" and m.rule.cookie == job.cookie)}

    def rank(self) -> dict[str, Any]:
        with self.s.lock:
            return {"rule": self.s.rank, "rules": list(rank_rules.names())}

    def set_rank(self, body: Any, done: threading.Event | None = None) -> dict[str, Any]:
        if not isinstance(body, dict) or set(body) != {"rule"}:
            raise BadRequest("API body: must be a JSON object {\"rule\": NAME}")
        rule = body["rule"]
        if rule not in rank_rules.names():
            raise Unprocessable(f"API body: field 'rule': must be one of "
                             f"{', '.join(rank_rules.names())}, got {rule!r}", "rule")
        s = self.s
        with s.lock:
            old, s.rank = s.rank, rule
            mods = self.reconciler.full(on_done=done.set if done else None)
            if rule != old:
                self.store.save()          # a restart keeps the rule chosen here
                s.metrics.inc("sluice_rank_changes_total")
                LOG.info("ranking rule %s -> %s (%d flow mods)", old, rule, len(mods))
            return {"rule": rule, "previous": old, "changed_rules": len(mods)}
