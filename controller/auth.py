"""Who may do what: the admin token, each job's own token, each job's report rate.

:class:`Northbound` is the controller's northbound operations as the REST API
(controller/api.py) serves them: it checks the admin token, then calls the service.
Job tokens are minted here; the service keeps only their sha256 with the job (an opaque
credential, persisted in its state file so a restart keeps them). A progress report
hands the service the sha256 of the token it came with and the job's rate limit: the
service compares the credential and charges the limit in the same step as it records
the report (under its report lock), so a job removed or registered again meanwhile
(a new token) never gets a report made with the old one, and only a report that names
an existing job, carries its token and one of its workers uses up the job's rate.
Refusals are :mod:`controller.errors` exceptions; tokens never appear in them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from typing import Any, Callable

from controller.config import CONFIG_SOURCE
from controller.errors import RateLimited, Refused, Unauthorized
from controller.ratelimit import RateLimiter
from controller.service import ControllerService
from sluice_common.errors import InputError
from sluice_common.tokens import token_refusal

Answer = tuple[dict[str, Any], threading.Event | None]
ADMIN_TOKEN = "the controller's admin token"
ADMIN_TOKEN_HOW = "the SLUICE_ADMIN_TOKEN the controller was started with"


def token_sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Northbound:
    """Tokens and rate limits in front of a :class:`ControllerService`.

    The admin token and the per-job report rate come from the service's config; the
    clock is the service's (tests move it)."""

    def __init__(self, service: ControllerService,
                 clock: Callable[[], float] | None = None) -> None:
        if not service.config.admin_token:
            raise InputError(CONFIG_SOURCE, "an admin token is required", field="admin_token")
        self.service = service
        self._admin = service.config.admin_token.encode()
        self.limiter = RateLimiter(service.config.rate_per_s,
                                   clock or (lambda: self.service.clock()))

    # ---- authentication -----------------------------------------------------------
    def check_admin(self, token: str | None) -> None:
        """Unauthorized unless ``token`` is the admin token; no token and a wrong one get
        different reasons."""
        if not token or not hmac.compare_digest(token.encode(), self._admin):
            raise Unauthorized(token_refusal(token, ADMIN_TOKEN, ADMIN_TOKEN_HOW),
                               token_given=bool(token))

    @staticmethod
    def _credential(token: str | None) -> str:
        """What the service compares with the credential it keeps ('' matches none)."""
        return token_sha(token) if token else ""

    def _charge(self, job_id: str) -> None:
        """Called by the service for a report it found admissible, before recording it."""
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
        return self.service.progress(job_id, body, t0, done,
                                     credential=self._credential(token), admit=self._charge)

    def progress_many(self, reports: list[tuple[str, str | None, Any, float,
                                                threading.Event | None]]
                      ) -> list[Answer | Refused]:
        """Reports (job, token, body, t0, done) that arrived together go to the service
        together (one reconcile); per report its answer or refusal."""
        return self.service.progress_many(
            [(job_id, body, t0, done, self._credential(token))
             for job_id, token, body, t0, done in reports], admit=self._charge)
