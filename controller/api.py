"""Northbound REST API (FastAPI on uvicorn, in a thread of the controller process).

    POST   /jobs[?wait=1]               admin token   register {id, servers, workers, scheduler}
    DELETE /jobs/{id}[?wait=1]          admin token   remove the job and its rules
    POST   /jobs/{id}/progress[?wait=1] job token     {worker, batch}; wait=1 answers after
                                                       the switches' barrier replies
    POST   /rank[?wait=1]               admin token   {rule}: progress|remaining|attained
    GET    /jobs | /flows[?job=ID] | /rules | /links | /rank | /metrics | /health
    GET    /live | /live/state          the live picture (HTML) and its data (JSON)
    GET    /openapi.json | /docs        the machine-readable API and its browsable page

Tokens travel as ``Authorization: Bearer <token>``. Answers: 400 a body that does not
parse or does not fit its schema (every problem listed in ``errors``), 422 a body that
fits its schema but breaks a rule the schema cannot express (``field`` names it: a
duplicate server or worker id, the same endpoint twice, an IP that is not a host of the
topology, a worker the job does not have), 401 missing/wrong token, 404 unknown job or
path, 409 conflict with the controller's state (the job id is registered, a flow is
another job's), 411/413 missing or oversized body, 429 too many reports. A refused
request changes nothing. Nothing is logged per request: tokens are never logged.

Where the checks live: request models (pydantic) reject malformed bodies with every
error at once; the body-size limit is ASGI middleware; tokens and the per-job report
rate are checked by the northbound guard (controller.auth) before the service is
called; what needs the controller's state (IPs that are hosts of the topology, a job's
workers, duplicate jobs) is the service's. Both refuse with controller.errors
exceptions, and :data:`STATUS` below is the one place they become status codes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
import threading
import time
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt,
                      ValidationError)
from prometheus_client import CONTENT_TYPE_LATEST

from controller import live
from controller.auth import Northbound
from controller.errors import (BadRequest, Conflict, NotFound, RateLimited, Refused,
                               Unauthorized, Unprocessable)
from sluice_common import rank_rules
from controller.progress_batch import ProgressBatcher
from controller.registry import MAX_ENDPOINTS
from controller.service import ControllerService
from sluice_common.http_service import (BodyLimit, JsonBodyBounds, ThreadedServer, bearer_of,
                                        bearer_token, document_400_for_bad_requests,
                                        http_error_reason, json_bounds_refusal, page_of, read_body,
                                        serve_api_pages, validation_messages)

LOG = logging.getLogger("sluice.controller.api")
MAX_BODY = 64 * 1024
WAIT_TIMEOUT_S = 10.0
JOB_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
IPV4 = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"
JSON_TYPES = (b"application/json",)
DEFAULT_PAGE = 100          # items per page of /jobs, /flows, /rules unless ?limit= says
MAX_PAGE = 1000

# Why the controller refused -> the status code it answers with.
STATUS: dict[type[Refused], int] = {BadRequest: 400, Unauthorized: 401, NotFound: 404,
                                    Conflict: 409, Unprocessable: 422, RateLimited: 429}


def status_of(err: Refused) -> int:
    return next(code for kind, code in STATUS.items() if isinstance(err, kind))


def refusal(err: Refused) -> tuple[int, dict]:
    """(status, JSON answer) of a refused request."""
    status = status_of(err)
    field = getattr(err, "field", None)
    return status, {"error": err.reason, "status": status, **({"field": field} if field else {})}


# ---- request and answer models ---------------------------------------------------------

class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _whole(value: Any) -> Any:
    # JSON Schema (OpenAPI 3.1) reads 4126.0 as the integer 4126: so does the API. A
    # fraction (4126.5), a string ("4126") or a boolean stays an error (strict).
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _no_default(schema: dict) -> None:
    schema.pop("default", None)       # optional: left out, never null


# an integer as the OpenAPI document says it: a JSON number without a fraction
JsonInt = Annotated[StrictInt, BeforeValidator(_whole)]


def json_int(**bounds: int) -> Any:
    """JsonInt within ``bounds`` (ge, le, lt): the bounds go on the integer itself, so
    the schema says ``minimum``/``maximum``; put after the BeforeValidator (as in
    ``Annotated[JsonInt, Field(ge=1)]``) they would reach the OpenAPI document as the
    non-standard keys ``ge``/``le`` that no client or validator reads."""
    return Annotated[int, Field(strict=True, **bounds), BeforeValidator(_whole)]


class Endpoint(_Body):
    # (optional fields are left out, never null: the OpenAPI types carry no null)
    id: Annotated[str, Field(pattern=JOB_ID)] = Field(
        None, json_schema_extra=_no_default, description="default: s0, s1, ... / w0, w1, ...")
    ip: str = Field(pattern=IPV4, json_schema_extra={"format": "ipv4"},
                    description="IPv4 address of a host of the topology (dotted quad)")
    port: json_int(ge=1, le=65535)


class JobRegistration(_Body):
    id: str = Field(pattern=JOB_ID)
    servers: list[Endpoint] = Field(min_length=1, max_length=MAX_ENDPOINTS)
    workers: list[Endpoint] = Field(min_length=1, max_length=MAX_ENDPOINTS)
    scheduler: Endpoint = Field(
        None, json_schema_extra=_no_default, description="the ps-lite scheduler: workers' control messages to it travel "
                          "at the level of their pull from the first server")
    # sizes for the size-aware ranking rules (the service decides whether it takes them)
    total_batches: json_int(ge=1, lt=2**62) = Field(
        None, json_schema_extra=_no_default)
    bytes_per_batch: json_int(ge=1, lt=2**62) = Field(
        None, json_schema_extra=_no_default)


class ProgressReport(_Body):
    worker: str = Field(pattern=JOB_ID, description="a worker id of the job")
    batch: JsonInt = Field(ge=0, lt=2**62, description="the batch the worker is at")


def _known_rule(name: str) -> str:
    if name not in rank_rules.names():
        raise ValueError(f"must be one of {', '.join(rank_rules.names())}")
    return name


class RankRule(_Body):
    # checked and listed from the registry when asked, so a rule registered after this
    # module was imported is offered too
    rule: Annotated[str, AfterValidator(_known_rule)] = Field(
        json_schema_extra=lambda schema: schema.update(enum=list(rank_rules.names()),
                                                       description=" | ".join(rank_rules.names())))


class Error(BaseModel):
    """Every refusal: what to fix in `error`, the status again, every problem of a
    refused body in `errors`, the field to fix in `field` (422)."""
    error: str
    status: int
    errors: list[str] | None = None
    field: str | None = None


def _page_params(limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="items per page")
                                  ] = DEFAULT_PAGE,
                 cursor: Annotated[str, Query(
                     pattern=r"^[0-9]{1,9}$",
                     description="the `next` of the previous page")] = None
                 ) -> tuple[int, str | None]:
    return limit, cursor


Paging = Annotated[tuple[int, str | None], Depends(_page_params)]
ERRORS = {s: {"model": Error} for s in (400, 401, 404, 409, 411, 413, 415, 429)}
# What a registration must hold to that its schema cannot say (422, `field` names it;
# 409 for what clashes with the registered jobs): the register operation's description
# and its 422 answer say it.
REGISTER_RULES = (
    "Rules the schema cannot express: the ids of `servers` are unique, and so are those "
    "of `workers` (422); every endpoint (ip, port) of the job, the scheduler's included, "
    "appears once: no endpoint is shared by a server and a worker (422); every `ip` is a "
    "host of the controller's topology (the document's `enum`; 422). Against the "
    "registered jobs: the `id` is not registered yet, and none of the job's flows "
    "(worker -> server port, server -> worker port) is another job's (409).")
REGISTER_ERRORS = {**ERRORS, 201: {"links": {   # what comes next for a registered job
    "RemoveJob": {"operationId": "remove_jobs__job_id__delete",
                  "parameters": {"job_id": "$response.body#/id"}},
    "JobFlows": {"operationId": "flows_flows_get", "parameters": {"job": "$response.body#/id"}},
    "ReportProgress": {"operationId": "progress_jobs__job_id__progress_post",
                       "parameters": {"job_id": "$response.body#/id"}}}},
    422: {"model": Error, "description": "the body fits the schema but breaks one of its "
          "rules (a duplicate server or worker id, one endpoint twice or shared by a server "
          "and a worker, an IP that is not a host): `field` names it"}}
PROGRESS_ERRORS = {**ERRORS, 422: {"model": Error, "description": "`worker` is not a "
                                   "worker of the job: `field` names it"}}
# The progress route reads its body itself (the hot path); this documents what it reads.
PROGRESS_OPENAPI = {
    "parameters": [{"name": "wait", "in": "query", "required": False,
                    "schema": {"type": "string"},
                    "description": "1: answer once the switches applied it"}],
    "requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/ProgressReport"}}}},
    "security": [{"HTTPBearer": []}]}
# (str, default None: the OpenAPI type is a string, never null)
Wait = Annotated[str, Query(description="1: answer once the switches applied it")]
JobId = Annotated[str, Path(pattern=JOB_ID)]
JobIdQuery = Annotated[str, Query(pattern=JOB_ID, description="only this job's flows")]


def _wait(wait: str | None, answer: dict, done: threading.Event, t0: float) -> dict:
    """``?wait=1``: answer once the switches confirmed the change (barrier replies)."""
    if wait not in (None, "0", ""):
        answer["applied"] = done.wait(WAIT_TIMEOUT_S)
        answer["latency_ms"] = round((time.monotonic() - t0) * 1000, 3)
    return answer


class LoopEvent:
    """What the service sets once the switches applied a report (``set()``, from the
    thread that got their barrier replies), as an asyncio future the report's request
    awaits. Lighter than a threading.Event per report: nothing waits on it in a thread."""

    __slots__ = ("_loop", "_future")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop, self._future = loop, loop.create_future()

    def set(self) -> None:
        self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if not self._future.done():
            self._future.set_result(True)

    def is_set(self) -> bool:
        return self._future.done() and not self._future.cancelled()

    async def wait_async(self, timeout: float) -> bool:
        if not self._future.done():
            try:
                async with asyncio.timeout(timeout):
                    await self._future
            except TimeoutError:
                pass
        return self.is_set()


async def handle_progress(service: Northbound, job_id: str, raw: bytes,
                          authorization: str | None, wait: str | None,
                          batcher: ProgressBatcher | None = None) -> tuple[int, dict]:
    """One progress report -> (status, JSON answer): the body through the ProgressReport
    model (every error listed), the job's bearer token and per-job rate limit checked by
    the northbound guard, ``wait=1`` answered on the switches' barrier replies.

    The service runs in the ``batcher``'s thread, not on the event loop (a report can
    wait for the service's lock while a registration reconciles every flow); reports
    arriving together are handed over together, one reconcile for all (bench/reliability/soak.py)."""
    t0 = time.monotonic()
    refused = json_bounds_refusal(raw)
    if refused:
        return 400, {"error": refused, "status": 400, "errors": [refused]}
    try:
        body = ProgressReport.model_validate_json(raw)
    except ValidationError as err:
        messages = validation_messages([{**e, "loc": ("body", *e["loc"])}
                                        for e in err.errors()])
        return 400, {"error": "; ".join(messages), "status": 400, "errors": messages}
    loop = asyncio.get_running_loop()
    done = LoopEvent(loop)
    batcher = batcher or ProgressBatcher(service)
    try:
        answer, sent = await batcher.report(job_id, bearer_of(authorization), _body(body),
                                            t0, done)
    except Refused as err:
        return refusal(err)
    if sent is not None and wait not in (None, "0", ""):
        answer["applied"] = await done.wait_async(WAIT_TIMEOUT_S)
        answer["latency_ms"] = round((time.monotonic() - t0) * 1000, 3)
    return 200, answer


class ProgressFastPath:
    """The ASGI app the API server runs: ``POST /jobs/{id}/progress`` (every batch of every
    worker) is answered here, everything else goes to the FastAPI app. FastAPI's own
    middleware (error handling, OpenTelemetry hooks that read the environment on every
    request) and routing cost more than the report itself (measured with py-spy in
    bench/reliability/soak_controller.py), and the controller's reaction latency is measured on this
    path. The body limit (411/413) comes first, as for every route; the answers are
    those of the documented route."""

    PATH = re.compile(r"/jobs/([A-Za-z0-9][A-Za-z0-9._-]{0,63})/progress/?")

    def __init__(self, app, service: Northbound, batcher: ProgressBatcher | None = None):
        self.app, self.service, self.batcher = app, service, batcher
        self._limited = BodyLimit(self._progress, max_body=MAX_BODY,
                                  default_content_type=b"application/json",
                                  error_body=_error_body, content_types=JSON_TYPES)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            m = self.PATH.fullmatch(scope["path"])
            if m is not None:
                scope["sluice.job"] = m.group(1)
                return await self._limited(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _progress(self, scope, receive, send):
        body = await read_body(receive)
        if body is None:
            return
        auth = wait = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                auth = value.decode("latin-1")
        if scope.get("query_string"):
            wait = parse_qs(scope["query_string"].decode("latin-1")).get("wait", [None])[0]
        try:
            status, answer = await handle_progress(
                self.service, scope["sluice.job"], body, auth, wait, self.batcher)
        except Exception:                 # a bug must not drop the connection silently
            LOG.exception("API POST %s", scope["path"])
            status, answer = 500, {"error": "internal error (see controller log)",
                                   "status": 500}
        data = json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


def _error_body(status: int, reason: str) -> dict:
    return {"error": reason, "status": status}


def _body(model: BaseModel) -> dict[str, Any]:
    body = model.model_dump(exclude_none=True)
    return body


def _refusals(app: FastAPI) -> None:
    """The body limits and the answers of every refusal (Error: error, status, errors)."""
    # (the last added runs first: the size limit, then the shape's bounds)
    app.add_middleware(JsonBodyBounds, error_body=_error_body)
    app.add_middleware(BodyLimit, max_body=MAX_BODY, default_content_type=b"application/json",
                       error_body=_error_body, content_types=JSON_TYPES)

    @app.exception_handler(Refused)
    async def refused(_request: Request, err: Refused):
        status, answer = refusal(err)
        headers = None
        if isinstance(err, Unauthorized):     # RFC 6750: how to authenticate
            from sluice_common.tokens import www_authenticate
            headers = {"WWW-Authenticate": www_authenticate(
                "sluice-controller", "given" if err.token_given else None)}
        return JSONResponse(answer, status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def bad_body(_request: Request, err: RequestValidationError):
        messages = validation_messages(err)
        return JSONResponse({"error": "; ".join(messages), "status": 400,
                             "errors": messages}, 400)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException):
        reason, headers = http_error_reason(app, request, err, "no such path: ")
        return JSONResponse({"error": reason, "status": err.status_code}, err.status_code,
                            headers=headers)


def _read_routes(app: FastAPI, service: ControllerService) -> None:
    """What anyone may read: health, jobs, flows, rules, links, metrics, the live page,
    the ranking rule."""
    @app.get("/health")
    def health() -> dict:
        """Liveness: 200 {ok: true}."""
        return {"ok": True}

    @app.get("/jobs", responses={400: ERRORS[400]})
    def jobs(paging: Paging) -> dict:
        """The registered jobs with their endpoints and workers' last batches, a page at a
        time (`next`: the cursor of the next page, null on the last; `total`)."""
        return page_of(service.jobs(), "jobs", *paging)

    @app.get("/flows", responses={400: ERRORS[400], 404: ERRORS[404]})
    def flows(paging: Paging, job: JobIdQuery = None) -> dict:
        """Each job flow (push/pull) with its batch, priority level, DSCP and rules, a page
        at a time."""
        answer = service.flows(job)
        return {**answer, **page_of(answer["flows"], "flows", *paging)}

    @app.get("/rules", responses={400: ERRORS[400]})
    def rules(paging: Paging) -> dict:
        """The flow rules the switches were told to hold, a page at a time."""
        return page_of(service.rules(), "rules", *paging)

    @app.get("/links")
    def links() -> dict:
        """Per switch port: measured rates, byte counters and the peer behind it."""
        return service.links()

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics():
        """Prometheus series (see docs/metrics.md)."""
        return PlainTextResponse(service.metrics_text(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/live", response_class=HTMLResponse)
    def live_page():
        """The live picture: fabric, link utilisation, jobs, flows and their levels."""
        return HTMLResponse(live.PAGE.read_text())

    @app.get("/live/state")
    def live_state() -> dict:
        """The live page's data: nodes, links with utilisation, jobs, flows."""
        return live.live_state(service.config.topology, service.jobs(),
                               service.flows()["flows"], service.links()["ports"])

    @app.get("/rank")
    def rank() -> dict:
        """The active ranking rule and the rules there are."""
        return service.rank()


def build_app(service: ControllerService) -> FastAPI:
    # tokens and rate limits, the service behind it (no service: only the OpenAPI
    # document is wanted, sluice/reference.py)
    guard = Northbound(service) if service is not None else None
    # one batch of reports at a time in the service (it serialises them anyway)
    reporters = ProgressBatcher(guard, ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="sluice-progress"))
    app = FastAPI(title="sluice controller", version="1", docs_url=None, redoc_url=None,
                  description="Northbound API of the sluice OpenFlow controller: the "
                  "scheduler registers PS jobs, workers report progress, anyone reads "
                  "jobs, flows, rules, links and metrics.")
    app.state.guard, app.state.reporters = guard, reporters     # for serve_app
    _refusals(app)
    serve_api_pages(app, "sluice controller")     # /docs, /redoc: no CDN needed

    def admin(token: str | None = Depends(bearer_token)) -> str:
        guard.check_admin(token)
        return token

    _read_routes(app, service)
    @app.post("/jobs", status_code=201, responses=REGISTER_ERRORS,
              description="Register a PS job (admin token); answers with the job's own "
              "progress token. " + REGISTER_RULES)
    def register(body: JobRegistration, token: str = Depends(admin), wait: Wait = None) -> dict:
        t0, done = time.monotonic(), threading.Event()
        return _wait(wait, guard.register_job(token, _body(body), done), done, t0)

    @app.post("/jobs/{job_id}/progress", responses=PROGRESS_ERRORS, response_model=None,
              openapi_extra=PROGRESS_OPENAPI)
    async def progress(job_id: str, request: Request) -> JSONResponse:
        """A worker's progress (the job's token); its flows' levels may change. A rule the
        schema cannot express: `worker` is one of the job's registered workers (422)."""
        # Served by ProgressFastPath before FastAPI (serve_app); this route documents it
        # and answers the same way should a request reach it.
        status, answer = await handle_progress(
            guard, job_id, await request.body(), request.headers.get("authorization"),
            request.query_params.get("wait"), reporters)
        return JSONResponse(answer, status)

    @app.delete("/jobs/{job_id}", responses=ERRORS)
    def remove(job_id: JobId, wait: Wait = None,
               token: str | None = Depends(bearer_token)) -> dict:
        """Remove a job and its rules (admin token)."""
        t0, done = time.monotonic(), threading.Event()
        return _wait(wait, guard.remove_job(token, job_id, done), done, t0)

    @app.post("/rank", responses=ERRORS)
    def set_rank(body: RankRule, token: str = Depends(admin), wait: Wait = None) -> dict:
        """Switch the ranking rule at run time (admin token); flows are re-ranked at once."""
        t0, done = time.monotonic(), threading.Event()
        return _wait(wait, guard.set_rank(token, _body(body), done), done, t0)

    # the request models as pydantic writes them (FastAPI's own copy turns every bound
    # into a float: minimum 1.0, exclusiveMaximum 4.611686018427388e+18)
    document_400_for_bad_requests(app, extra_schemas=[ProgressReport, JobRegistration,
                                                      RankRule], max_body=MAX_BODY)
    if service is not None:
        _document_hosts(app, sorted(service.known_ips))
    return app


def _document_hosts(app: FastAPI, ips: list[str]) -> None:
    """A registration's IPs must be hosts of the controller's topology (422 otherwise):
    the served document says which (``enum``), so that a client, and schemathesis'
    stateful phase, can write a registration the controller takes."""
    build = app.openapi

    def openapi() -> dict:
        doc = build()
        doc["components"]["schemas"]["Endpoint"]["properties"]["ip"]["enum"] = ips
        return doc
    app.openapi = openapi


def serve_app(service: ControllerService):
    """The ASGI app the API server runs: the FastAPI app of :func:`build_app` behind the
    progress fast path."""
    app = build_app(service)
    return ProgressFastPath(app, app.state.guard, app.state.reporters)


class ApiServer(ThreadedServer):
    """The API on uvicorn in its own thread. ``port=0`` picks a free port (tests)."""

    def __init__(self, service: ControllerService, host: str = "127.0.0.1", port: int = 8080,
                 tls: tuple[str, str] | None = None):
        self.service = service
        super().__init__(serve_app(service), host, port, tls=tls)
