"""The scheduler service's local REST API (FastAPI on uvicorn).

    GET  /health                 counts per state, free GPUs
    GET  /jobs[?state=S]         every job (JSON)
    GET  /jobs/<id>              one job with its event log
                                 (a waiting job: reason, position, estimated_start)
    POST /submissions            body: a job YAML file; 201 {submission, jobs} once durable
    POST /jobs/<id>/cancel       cancel a queued or running job
    GET  /metrics                Prometheus series (job_scheduler/service/metrics.py)
    GET  /openapi.json | /docs   the machine-readable API and its browsable page

Admin auth: when a token is configured, POST needs ``Authorization: Bearer <token>``
(401 without one or with an unknown one, each its own reason; 403 for a user's own token
where the admin token is needed); reads stay open on the (loopback by default) listen address. Bodies
over ``max_body`` bytes get 413 without being read (middleware). A job file with
problems gets 400 listing every one (``errors``), or 422 when the file fits its schema
but breaks a rule no schema can express (duplicate job names, more GPUs or parameter
servers than the topology has), naming the field. Nothing is logged per request: tokens
are never logged.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Annotated, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from job_scheduler.service.scheduler import Conflict, NotFound, SchedulerService
from job_scheduler.service.metrics import metrics_text
from job_scheduler.service.store import MAX_ID, STATES, KeyReused
from job_scheduler.service.submission_check import CheckBusy
from job_scheduler.service.wait_forecast import REASON_CODES
from sluice_common.errors import InputError, RuleBroken
from sluice_common.job_schema import JobFile
from sluice_common.http_service import (BodyLimit, ThreadedServer, bearer_token,
                                        document_400_for_bad_requests, http_error_reason,
                                        serve_api_pages, validation_messages)

log = logging.getLogger("sluice.scheduler.api")

DEFAULT_MAX_BODY = 1 << 20     # 1 MiB: a job file is a few KiB
DEFAULT_PAGE = 100             # jobs per page of GET /jobs unless ?limit= says otherwise
MAX_PAGE = 1000
MAX_ERROR_CHARS = 4096         # an error answer stays a few KB, however bad the file
# what a job file may be sent as (YAML; JSON is YAML too); no type at all is taken as YAML
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml",
              "text/plain", "application/json")
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


async def _in_thread_no_traceback(fn, *args):
    """``run_in_threadpool(fn, *args)``; an exception comes back without the frames it
    passed through. Why: re-raised from anyio's future, the exception and those frames
    form a reference cycle (the future is a local of one of them) that keeps every frame's
    locals - a refused job file, its text, the request - until a full garbage collection,
    which an idle service may not run for a long time: twenty clients sending large bad
    files left the scheduler at 2.4-2.7x its resident memory, back to 1.03x after
    ``gc.collect()`` (bench/api/bench_hostile.py, bench/HISTORY.md). The answer needs only
    the exception's own fields."""
    try:
        return await run_in_threadpool(fn, *args)
    except Exception as err:
        raise err.with_traceback(None)


def _documented(description: str, schema: str = "Error") -> dict:
    """An answer of the OpenAPI document: a JSON body of the component ``schema``."""
    return {"description": description, "content": {"application/json": {"schema": {
        "$ref": f"#/components/schemas/{schema}"}}}}


ERRORS = {400: _documented("bad request: every problem listed"),
          401: _documented("no token given, or not the admin token (the error says which)"),
          403: _documented("a user's own token (--users) where the admin token is needed"),
          404: _documented("no such job"),
          409: _documented("the job is no longer queued or running"),
          413: _documented("body over the size limit"),
          429: _documented("every slot for checking a large job file is taken: retry "
                           "after Retry-After seconds with the same Idempotency-Key"),
          503: _documented("not stored (disk full, database locked); retry with the "
                           "same Idempotency-Key")}


def _error_handlers(app: FastAPI) -> None:
    """Every refusal as an Error (``error``; a refused job file its problems too)."""
    @app.exception_handler(ApiError)
    async def api_error(_request: Request, err: ApiError):
        return AsciiJSONResponse({"error": err.message, **err.extra}, err.status,
                                 headers=err.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException):
        reason, headers = http_error_reason(app, request, err, "no route ")
        return JSONResponse({"error": reason}, err.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, err: RequestValidationError):
        messages = validation_messages(err)
        return JSONResponse({"error": "; ".join(messages), "errors": messages}, 400)


def _submit_route(app: FastAPI, server: "SchedulerHTTPServer", admin) -> None:
    """POST /submissions: a job file in, every job queued durably or none. A user's own
    token (``--users``) submits as that user; the admin token as the service's account."""

    def submitter(token: str | None = Depends(bearer_token)) -> str | None:
        from job_scheduler.service.users import user_of

        user = user_of(token, server.users)
        if user is None:
            admin(token)
        return user

    submit_responses = {
        200: _documented("the Idempotency-Key was seen before with this same body: the "
                         "jobs of that first submission, nothing queued again", "Submitted"),
        201: {**_documented("every job queued, durably", "Submitted"),
              # what a client (and schemathesis' stateful phase) does next with a job
              "links": {"GetJob": {"operationId": "job_jobs__job_id__get",
                                   "parameters": {"job_id": "$response.body#/jobs/0"}},
                        "CancelJob": {"operationId": "cancel_jobs__job_id__cancel_post",
                                      "parameters": {"job_id": "$response.body#/jobs/0"}}}},
        **{k: v for k, v in ERRORS.items() if k not in (403, 404)},
        411: _documented("a chunked body (no Content-Length)"),
        415: _documented("the body's Content-Type is not a job file's (application/yaml)"),
        422: _documented("the job file fits its schema but breaks a rule the schema "
                         "cannot express (`field` names it; every problem listed), or the "
                         "Idempotency-Key was used before with a different body")}

    @app.post("/submissions", status_code=201,
              responses=submit_responses, response_model=None,
              openapi_extra={"requestBody": {
                  "required": True, "description": "a job YAML file (its JSON Schema: "
                  "`sluice schema jobs`); JSON is YAML too", "content": {
                      media: {"schema": {"$ref": "#/components/schemas/JobFile"}}
                      for media in ("application/yaml", "application/json")}}})
    async def submit(request: Request, user: str | None = Depends(submitter),
                     x_sluice_source: Annotated[str, Header(
                         description="the file name the errors name")] = None,
                     idempotency_key: Annotated[str, Header(
                         json_schema_extra={"pattern": r"^([A-Za-z0-9._-]{8,128})?$"},
                         description="retry safely (empty: none): the same key and body "
                         "queue the "
                         "file once (200 on a repeat); the same key with another body "
                         "is refused (422)")] = None) -> JSONResponse:
        """Queue every job of a job YAML file, durably, or none. Each job may start at the
        earliest `arrival` seconds after the submission (`schedule[].not_before`, Unix
        time). 400: the body is not UTF-8 YAML or does not fit the job file's schema
        (every problem listed). 422: it fits the schema but breaks a rule the schema
        cannot express, naming the field: job names unique within the file (`name`), a
        job's `max_gpus` at most the GPUs of the service's topology, its `num_ps` at
        most its hosts."""
        source = _SOURCE_RE.sub("_", x_sluice_source or "API body")[:200]
        idempotency_key = idempotency_key or None        # an empty header: no key
        if idempotency_key is not None and not re.fullmatch(r"[A-Za-z0-9._-]{8,128}",
                                                            idempotency_key):
            raise ApiError(400, "Idempotency-Key must be 8-128 letters, digits, . _ -, "
                           f"got {idempotency_key[:40]!r}", field="Idempotency-Key")
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype and ctype not in YAML_TYPES:
            raise ApiError(415, f"Content-Type {ctype!r} is not a job file: send it as "
                           "Content-Type: application/yaml (curl -H 'Content-Type: "
                           "application/yaml' --data-binary @jobs.yaml)")
        body = await request.body()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ApiError(400, str(InputError(source, f"not UTF-8 text: {err.reason}")))
        try:
            result = await _in_thread_no_traceback(server.service.submit, text, source,
                                                   idempotency_key, user)
        except InputError as err:
            # The whole file is rejected: nothing of it was queued. The answer stays a
            # few KB: the first problems in full, then how many more there were. 422: it
            # parses and fits the schema, but breaks a rule no schema says; 400 else.
            status = 422 if all(isinstance(e, RuleBroken) for e in err.errors) else 400
            raise ApiError(status, _bounded(str(err)), source=err.source, element=err.element,
                           field=err.field, reason=_bounded(err.reason),
                           **_bounded_errors([e.to_dict() for e in err.errors]))
        except KeyReused as err:
            raise ApiError(422, str(err), field="Idempotency-Key")
        except CheckBusy as err:       # not refused: every slot for a large file is taken
            raise ApiError(429, str(err), {"Retry-After": str(err.retry_after)})
        except Exception as err:
            raise _unexpected(err)
        return JSONResponse({"submission": result.submission_id, "jobs": result.job_ids,
                             "duplicate": result.duplicate, "schedule": result.schedule},
                            status_code=200 if result.duplicate else 201)


def build_app(server: "SchedulerHTTPServer") -> FastAPI:
    app = FastAPI(title="sluice scheduler", version="1", docs_url=None, redoc_url=None,
                  description="The sluice job scheduler as a durable service: submit job "
                  "files, list and cancel jobs, read its metrics.")
    app.add_middleware(BodyLimit, max_body=server.max_body,
                       error_body=lambda status, reason: {"error": reason})
    _error_handlers(app)
    serve_api_pages(app, "sluice scheduler")      # /docs, /redoc: no CDN needed

    def admin(token: str | None = Depends(bearer_token)) -> None:
        from job_scheduler.service.users import admin_refusal

        refused = admin_refusal(token, server.token, server.users)
        if refused:
            raise ApiError(*refused)

    @app.get("/health")
    def health() -> dict:
        """Liveness, job counts per state, free GPUs."""
        return server.service.health()

    @app.get("/jobs", responses={400: ERRORS[400]})
    def jobs(state: Annotated[list[Literal[STATES]], Query(  # type: ignore[valid-type]
                 description="only jobs in these states (repeat for several)")] = None,
             limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="jobs per page")
                              ] = DEFAULT_PAGE,
             cursor: Annotated[str, Query(
                 pattern=r"^[0-9]{1,19}$",
                 description="the `next` of the previous page")] = None) -> JobPage:
        """The jobs by id, a page at a time: `next` is the cursor of the next page (null
        on the last), `total` the number of jobs in the given states."""
        after = min(int(cursor), MAX_ID) if cursor else 0
        page, total, more = server.service.store.page(state, after, limit)
        return {"jobs": server.service.waits.public_many(page), "total": total,
                "next": str(page[-1].id) if more and page else None}

    @app.get("/jobs/{job_id}", responses={404: ERRORS[404]})
    def job(job_id: int) -> JobDetail:
        """One job with its event log; a waiting job with why it waits, its place in
        the policy's order and its estimated start; with a controller, `controller`: its
        registration there for its last start ({state: registered | pending (failed,
        being retried) | failed, id, error, attempts}; null before its first start)."""
        service = server.service
        record = service.store.get(job_id)
        if record is None:
            raise ApiError(404, f"no job {job_id}")
        events = [{"at": at, "kind": k, "detail": d} for at, k, d in service.store.events(job_id)]
        controller = ({"controller": service.controller_view(record)}
                      if service.controller else {})
        return {**service.waits.public(record), **controller, "events": events}

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics():
        """Prometheus series (see docs/metrics.md)."""
        return PlainTextResponse(metrics_text(lambda: server.service),
                                 media_type=CONTENT_TYPE_LATEST)

    _submit_route(app, server, admin)

    @app.post("/jobs/{job_id}/cancel", dependencies=[Depends(admin)],
              responses={k: ERRORS[k] for k in (401, 403, 404, 409, 503)})
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

    document_400_for_bad_requests(app, extra_schemas=[Error, Submitted, JobFile],
                                  max_body=server.max_body)
    return app


class AsciiJSONResponse(JSONResponse):
    """JSON in ASCII: an error may quote what it refused, and a YAML body can hold text
    UTF-8 cannot carry (a lone surrogate from a "\\ud90b" escape)."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode()


class Error(BaseModel):
    """Every refusal: what to fix in `error`; a refused job file also names `source`,
    `element`, `field` and `reason`, and lists every problem in `errors`."""
    error: str
    errors: list | None = None
    more_errors: int | None = None
    field: str | None = None


class Scheduled(BaseModel):
    id: int
    name: str
    arrival: float = Field(description="seconds after the submission (the job file's)")
    not_before: float = Field(description="Unix time: the job starts no earlier")


class Submitted(BaseModel):
    submission: int
    jobs: list[int]
    duplicate: bool
    schedule: list[Scheduled]


class WaitReason(BaseModel):
    """Why a job waits: a stable ``code`` and a sentence."""
    code: Literal[REASON_CODES] = Field(  # type: ignore[valid-type]
        description="gpus: too few free GPUs for the job the policy takes next; "
        "behind: other jobs come first in the policy's order; arrival: its `arrival` "
        "lies ahead; policy: the policy chose to wait with GPUs free (the message names "
        "the term that decided, e.g. Lyapunov's Q+Z against V*C(n)); suspended: "
        "suspended, it waits to resume; slurm: started by sluice, kept PENDING by Slurm "
        "(the message carries Slurm's reason, e.g. Resources, Priority)")
    message: str


class Job(BaseModel):
    """A job as the service records it, with what it waits for and its estimates."""
    model_config = ConfigDict(extra="allow")
    id: int
    name: str
    state: Literal[STATES]  # type: ignore[valid-type]
    gpus: int | None = None
    placement: dict | None = None
    executor: str | None = None
    submitted_at: float | None = None
    started_at: float | None = None
    expected_end: float | None = None
    finished_at: float | None = None
    attempts: int = 0
    reason: WaitReason | str | None = Field(None, description=(
        "queued (or suspended) jobs, and running ones Slurm keeps PENDING: why it waits "
        "(WaitReason); an ended job: how it ended (text); a running job: null"))
    position: int | None = Field(None, description="a queued job's place (1-based) in the "
                                 "order the policy's dry run starts the queue")
    estimated_start: float | None = Field(None, description=(
        "Unix s: when the policy's dry run of the queue and running jobs starts this "
        "queued job (null: beyond the forecast, or it waits on a job with no "
        "estimated end)"))
    estimated_end: float | None = Field(None, description="Unix s: a running job's "
                                        "estimated end")


class Event(BaseModel):
    at: float
    kind: str
    detail: str | None = None


class ControllerRegistration(BaseModel):
    state: str = Field(description="registered | pending (failed, being retried) | failed "
                                   "(the job ended without it)")
    id: str | None = Field(None, description="the job's identity at the controller, "
                                             "NAME.ID: unique per submission")
    error: str | None = Field(None, description="the last failure, while not registered")
    attempts: int | None = Field(None, description="registration attempts so far")


class JobDetail(Job):
    controller: ControllerRegistration | None = Field(None, description=(
        "with a controller: the job's registration there for its last start (null before "
        "its first start, and without a controller)"))
    events: list[Event]


class JobPage(BaseModel):
    jobs: list[Job]
    next: str | None = Field(description="cursor of the next page; null on the last")
    total: int = Field(description="jobs in the given states")


def _bounded(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_ERROR_CHARS:
        return text
    return text[:MAX_ERROR_CHARS] + f"... ({len(text) - MAX_ERROR_CHARS} more characters)"


def _bounded_errors(errors: list[dict], most: int = 20) -> dict:
    out = {"errors": [{k: _bounded(v) if isinstance(v, str) else v for k, v in e.items()}
                      for e in errors[:most]]}
    if len(errors) > most:
        out["more_errors"] = len(errors) - most
    return out


class SchedulerHTTPServer(ThreadedServer):
    """The API on uvicorn; ``serve_forever``/``shutdown``/``server_close`` as before.
    ``service`` may be attached after construction (the store is locked first)."""

    def __init__(self, address: tuple[str, int], service: SchedulerService | None,
                 token: str | None = None, max_body: int = DEFAULT_MAX_BODY,
                 tls: tuple[str, str] | None = None):
        self.service = service
        self.token = token
        self.users: dict[str, str] = {}      # a user's own token -> Unix user (--users)
        self.max_body = max_body
        super().__init__(build_app(self), *address, tls=tls)
