"""The scheduler service's local REST API (FastAPI on uvicorn).

    GET  /health                 counts per state, free GPUs
    GET  /jobs[?state=S]         every job (JSON)
    GET  /jobs/<id>              one job with its event log
    POST /submissions            body: a job YAML file; 201 {submission, jobs} once durable
    POST /jobs/<id>/cancel       cancel a queued or running job
    GET  /metrics                Prometheus series (job_scheduler/service_metrics.py)
    GET  /openapi.json | /docs   the machine-readable API and its browsable page

Admin auth: when a token is configured, POST needs ``Authorization: Bearer <token>``
(401 otherwise); reads stay open on the (loopback by default) listen address. Bodies
over ``max_body`` bytes get 413 without being read (middleware). A job file with
problems gets 400 listing every one (``errors``). Nothing is logged per request: tokens
are never logged.
"""

from __future__ import annotations

import hmac
import logging
import re
from typing import Annotated

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from job_scheduler.service import Conflict, NotFound, SchedulerService
from job_scheduler.service_metrics import metrics_text
from job_scheduler.store import STATES
from sluice_common.errors import InputError
from sluice_common.http_service import (BodyLimit, ThreadedServer, bearer_token,
                                 document_400_for_bad_requests, validation_messages)

log = logging.getLogger("sluice.scheduler.api")

DEFAULT_MAX_BODY = 1 << 20     # 1 MiB: a job file is a few KiB
_SOURCE_RE = re.compile(r"[^A-Za-z0-9._/ -]")


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None, **extra):
        super().__init__(message)
        self.status, self.message, self.headers, self.extra = status, message, headers, extra


def _unexpected(err: Exception) -> ApiError:
    """A failure (disk full, database locked) answers 503: the client learns the request
    was NOT acknowledged and may retry."""
    log.exception("request failed")
    return ApiError(503, f"not done ({type(err).__name__}: {err}); retry later")


def build_app(server: "SchedulerHTTPServer") -> FastAPI:
    app = FastAPI(title="sluice scheduler", version="1",
                  description="The sluice job scheduler as a durable service: submit job "
                  "files, list and cancel jobs, read its metrics.")
    app.add_middleware(BodyLimit, max_body=server.max_body,
                       error_body=lambda status, reason: {"error": reason})
    errors = {s: {"description": "refused; {error: reason}"} for s in (400, 401, 404, 409,
                                                                        413, 503)}

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, err: ApiError):
        return JSONResponse({"error": err.message, **err.extra}, err.status,
                            headers=err.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException):
        reason = f"no route {request.method} {request.url.path}" \
            if err.status_code == 404 else str(err.detail)
        return JSONResponse({"error": reason}, err.status_code,
                            headers=getattr(err, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, err: RequestValidationError):
        messages = validation_messages(err)
        return JSONResponse({"error": "; ".join(messages), "errors": messages}, 400)

    def admin(token: str | None = Depends(bearer_token)) -> None:
        if server.token and not (token and hmac.compare_digest(token.encode(),
                                                               server.token.encode())):
            raise ApiError(401, "missing or wrong admin token",
                           {"WWW-Authenticate": 'Bearer realm="sluice-scheduler"'})

    @app.get("/health")
    def health() -> dict:
        """Liveness, job counts per state, free GPUs."""
        return server.service.health()

    @app.get("/jobs")
    def jobs(state: Annotated[list[str] | None, Query()] = None) -> dict:
        """Every job (optionally only those in the given states)."""
        if state and not set(state) <= set(STATES):
            raise ApiError(400, f"state must be one of {', '.join(STATES)}")
        return {"jobs": [j.to_public() for j in server.service.store.jobs(state)]}

    @app.get("/jobs/{job_id}", responses=errors)
    def job(job_id: int) -> dict:
        """One job with its event log."""
        service = server.service
        record = service.store.get(job_id)
        if record is None:
            raise ApiError(404, f"no job {job_id}")
        events = [{"at": at, "kind": k, "detail": d} for at, k, d in service.store.events(job_id)]
        return {**record.to_public(), "events": events}

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics():
        """Prometheus series (see docs/metrics.md)."""
        return PlainTextResponse(metrics_text(lambda: server.service),
                                 media_type=CONTENT_TYPE_LATEST)

    @app.post("/submissions", status_code=201, dependencies=[Depends(admin)], responses=errors,
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/yaml": {"schema": {
                      "type": "string", "description": "a job YAML file (its JSON Schema: "
                      "`sluice schema jobs`)"}}}}})
    async def submit(request: Request,
                     x_sluice_source: Annotated[str | None, Header()] = None,
                     idempotency_key: Annotated[str | None, Header()] = None):
        """Queue every job of a job YAML file, durably, or none (400 lists every problem)."""
        source = _SOURCE_RE.sub("_", x_sluice_source or "API body")[:200]
        if idempotency_key is not None and not re.fullmatch(r"[A-Za-z0-9._-]{8,128}",
                                                            idempotency_key):
            raise ApiError(400, "Idempotency-Key must be 8-128 letters, digits, . _ -")
        body = await request.body()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ApiError(400, str(InputError(source, f"not UTF-8 text: {err.reason}")))
        try:
            result = await run_in_threadpool(server.service.submit, text, source,
                                             idempotency_key)
        except InputError as err:
            # The whole file is rejected: nothing of it was queued.
            raise ApiError(400, str(err), source=err.source, element=err.element,
                           field=err.field, reason=err.reason,
                           errors=[e.to_dict() for e in err.errors])
        except Exception as err:
            raise _unexpected(err)
        return JSONResponse({"submission": result.submission_id, "jobs": result.job_ids,
                             "duplicate": result.duplicate},
                            status_code=200 if result.duplicate else 201)

    @app.post("/jobs/{job_id}/cancel", dependencies=[Depends(admin)], responses=errors)
    def cancel(job_id: int) -> dict:
        """Cancel a queued or running job."""
        try:
            return server.service.cancel(job_id).to_public()
        except NotFound as err:
            raise ApiError(404, str(err))
        except Conflict as err:
            raise ApiError(409, str(err))
        except Exception as err:
            raise _unexpected(err)

    document_400_for_bad_requests(app)
    return app


class SchedulerHTTPServer(ThreadedServer):
    """The API on uvicorn; ``serve_forever``/``shutdown``/``server_close`` as before.
    ``service`` may be attached after construction (the store is locked first)."""

    def __init__(self, address: tuple[str, int], service: SchedulerService | None,
                 token: str | None = None, max_body: int = DEFAULT_MAX_BODY,
                 tls: tuple[str, str] | None = None):
        self.service = service
        self.token = token
        self.max_body = max_body
        super().__init__(build_app(self), *address, tls=tls)
