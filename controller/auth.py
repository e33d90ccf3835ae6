"""Who may do what: the admin token, each job's own token, each job's report rate.

:class:`Northbound` is the controller's northbound operations as the REST API
(controller/api.py) serves them: it checks the bearer token (and, for progress reports,
the job's rate limit), then calls the service, which only ever sees authorised,
admitted requests. Job tokens are minted here; the service keeps only their sha256 with
the job (an opaque credential, persisted in its state file so a restart keeps them).
Refusals are :mod:`controller.errors` exceptions; tokens never appear in them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from typing import Any, Callable

from controller.errors import NotFound, RateLimited, Refused, Unauthorized
from controller.ratelimit import RateLimiter
from controller.service import ControllerService
from sluice_common.errors import InputError

Answer = tuple[dict[str, Any], threading.Event | None]


def token_sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Northbound:
    """Tokens and rate limits in front of a :class:`ControllerService`.

    The admin token and the per-job report rate come from the service's config (the
    controller's command line); the clock is the service's (tests move it)."""

    def __init__(self, service: ControllerService,
                 clock: Callable[[], float] | None = None) -> None:
        if not service.config.admin_token:
            raise InputError("argument --admin-token", "an admin token is required")
        self.service = service
        self._admin = service.config.admin_token.encode()
        self.limiter = RateLimiter(service.config.rate_per_s,
                                   clock or (lambda: self.service.clock()))

    # ---- authentication -----------------------------------------------------------
    def check_admin(self, token: str | None) -> None:
        if not token or not hmac.compare_digest(token.encode(), self._admin):
            raise Unauthorized("missing or wrong admin token")

    def _admit_report(self, job_id: str, token: str | None) -> None:
        """The job exists, the token is its own, and it is within its report rate."""
        credential = self.service.credential_of(job_id)
        if credential is None:
            raise NotFound(f"no job '{job_id}'")
        if not token or not hmac.compare_digest(token_sha(token), credential):
            raise Unauthorized("missing or wrong job token")
        if not self.limiter.admit(job_id):
            self.service.metrics.inc("sluice_progress_reports_total", result="rate_limited")
            raise RateLimited(f"job '{job_id}' reports too fast "
                              f"(limit {self.limiter.rate:g}/s)")

    # ---- admin operations ---------------------------------------------------------
    def register_job(self, token: str | None, body: Any,
                     done: threading.Event | None = None) -> dict[str, Any]:
        """Register a job; the answer carries the job's own token (shown only here)."""
        self.check_admin(token)
        job_token = secrets.token_urlsafe(24)
        answer = self.service.register_job(body, token_sha(job_token), done)
        self.limiter.forget(answer["id"])       # a job id used before starts afresh
        return {**answer, "token": job_token}

    def remove_job(self, token: str | None, job_id: str,
                   done: threading.Event | None = None) -> dict[str, Any]:
        self.check_admin(token)
        answer = self.service.remove_job(job_id, done)
        self.limiter.forget(job_id)
        return answer

    def set_rank(self, token: str | None, body: Any,
                 done: threading.Event | None = None) -> dict[str, Any]:
        self.check_admin(token)
        return self.service.set_rank(body, done)

    # ---- progress reports (the hot path) ------------------------------------------
    def progress(self, job_id: str, token: str | None, body: Any,
                 t0: float | None = None, done: threading.Event | None = None) -> Answer:
        self._admit_report(job_id, token)
        return self.service.progress(job_id, body, t0, done)

    def progress_many(self, reports: list[tuple[str, str | None, Any, float,
                                                threading.Event | None]]
                      ) -> list[Answer | Refused]:
        """Reports (job, token, body, t0, done) that arrived together: the admitted ones
        go to the service together (one reconcile); per report its answer or refusal."""
        out: list[Answer | Refused | None] = []
        admitted, where = [], []
        for job_id, token, body, t0, done in reports:
            try:
                self._admit_report(job_id, token)
            except Refused as err:
                out.append(err)
                continue
            where.append(len(out))
            out.append(None)
            admitted.append((job_id, body, t0, done))
        if admitted:
            for i, result in zip(where, self.service.progress_many(admitted)):
                out[i] = result
        return out
