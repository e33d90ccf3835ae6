"""The scheduler service's local HTTP API (standard library ``ThreadingHTTPServer``).

    GET  /health                 counts per state, free GPUs
    GET  /jobs[?state=S]         every job (JSON)
    GET  /jobs/<id>              one job with its event log
    POST /submissions            body: a job YAML file; 201 {submission, jobs} once durable
    POST /jobs/<id>/cancel       cancel a queued or running job

Admin auth: when a token is configured, POST needs ``Authorization: Bearer <token>``
(401 otherwise); reads stay open on the (loopback by default) listen address. Bodies
over ``max_body`` bytes get 413 without being read. Tokens are never logged: the access
log prints method, path and status only.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from job_scheduler.service import Conflict, NotFound, SchedulerService
from job_scheduler.store import STATES
from sluice.errors import InputError

log = logging.getLogger("sluice.scheduler.api")

DEFAULT_MAX_BODY = 1 << 20     # 1 MiB: a job file is a few KiB
_SOURCE_RE = re.compile(r"[^A-Za-z0-9._/ -]")


class SchedulerHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], service: SchedulerService,
                 token: str | None = None, max_body: int = DEFAULT_MAX_BODY):
        self.service = service
        self.token = token
        self.max_body = max_body
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: SchedulerHTTPServer
    server_version = "sluice-scheduler/1"
    protocol_version = "HTTP/1.1"
    timeout = 30          # seconds a connection may sit idle or trickle its request

    # ---- plumbing --------------------------------------------------------------------
    def log_message(self, fmt: str, *args) -> None:    # never the headers (tokens)
        pass

    def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = (json.dumps(body, sort_keys=True) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        log.debug("%s %s -> %d", self.command, urlsplit(self.path).path, status)

    def _error(self, status: int, message: str, **extra) -> None:
        self._send(status, {"error": message, **extra})

    def _authorised(self) -> bool:
        token = self.server.token
        if not token:
            return True
        given = self.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(),
                                                                token.encode())
        if not ok:
            self._send(HTTPStatus.UNAUTHORIZED, {"error": "missing or wrong admin token"},
                       {"WWW-Authenticate": 'Bearer realm="sluice-scheduler"'})
        return ok

    def _read_body(self) -> bytes | None:
        length = self.headers.get("Content-Length")
        if length is None:
            self._error(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
            return None
        try:
            n = int(length)
        except ValueError:
            self._error(HTTPStatus.BAD_REQUEST, "bad Content-Length")
            return None
        if n < 0:
            self._error(HTTPStatus.BAD_REQUEST, "bad Content-Length")
            return None
        if n > self.server.max_body:
            # Don't read it; close so the unread bytes cannot be taken as a new request.
            self.close_connection = True
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                        f"body of {n} bytes is over the {self.server.max_body}-byte limit")
            return None
        return self.rfile.read(n)

    # ---- routes ----------------------------------------------------------------------
    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        self._guarded(self._post)

    def _guarded(self, route) -> None:
        """An unexpected failure (disk full, database locked) answers 500/503 instead of
        dropping the connection: the client learns the request was NOT acknowledged."""
        try:
            route()
        except Exception as err:
            log.exception("%s %s failed", self.command, urlsplit(self.path).path)
            self.close_connection = True
            try:
                self._error(HTTPStatus.SERVICE_UNAVAILABLE,
                            f"not done ({type(err).__name__}: {err}); retry later")
            except OSError:
                pass

    def _get(self) -> None:
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        service = self.server.service
        if parts == ["health"]:
            return self._send(HTTPStatus.OK, service.health())
        if parts == ["jobs"]:
            states = parse_qs(url.query).get("state")
            if states and not set(states) <= set(STATES):
                return self._error(HTTPStatus.BAD_REQUEST,
                                   f"state must be one of {', '.join(STATES)}")
            jobs = service.store.jobs(states)
            return self._send(HTTPStatus.OK, {"jobs": [j.to_public() for j in jobs]})
        if len(parts) == 2 and parts[0] == "jobs" and parts[1].isdigit():
            job = service.store.get(int(parts[1]))
            if job is None:
                return self._error(HTTPStatus.NOT_FOUND, f"no job {parts[1]}")
            events = [{"at": at, "kind": k, "detail": d}
                      for at, k, d in service.store.events(job.id)]
            return self._send(HTTPStatus.OK, {**job.to_public(), "events": events})
        return self._error(HTTPStatus.NOT_FOUND, f"no route GET {url.path}")

    def _post(self) -> None:
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        if not (parts == ["submissions"] or (len(parts) == 3 and parts[0] == "jobs"
                                             and parts[1].isdigit() and parts[2] == "cancel")):
            return self._error(HTTPStatus.NOT_FOUND, f"no route POST {url.path}")
        if not self._authorised():
            return
        body = self._read_body()
        if body is None:
            return
        service = self.server.service
        if parts == ["submissions"]:
            return self._submit(service, body)
        try:
            job = service.cancel(int(parts[1]))
        except NotFound as err:
            return self._error(HTTPStatus.NOT_FOUND, str(err))
        except Conflict as err:
            return self._error(HTTPStatus.CONFLICT, str(err))
        return self._send(HTTPStatus.OK, job.to_public())

    def _submit(self, service: SchedulerService, body: bytes) -> None:
        source = _SOURCE_RE.sub("_", self.headers.get("X-Sluice-Source", "API body"))[:200]
        key = self.headers.get("Idempotency-Key")
        if key is not None and not re.fullmatch(r"[A-Za-z0-9._-]{8,128}", key):
            return self._error(HTTPStatus.BAD_REQUEST,
                               "Idempotency-Key must be 8-128 letters, digits, . _ -")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as err:
            return self._error(HTTPStatus.BAD_REQUEST,
                               str(InputError(source, f"not UTF-8 text: {err.reason}")))
        try:
            result = service.submit(text, source, key)
        except InputError as err:
            # The whole file is rejected: nothing of it was queued.
            return self._error(HTTPStatus.BAD_REQUEST, str(err), source=err.source,
                               element=err.element, field=err.field, reason=err.reason)
        status = HTTPStatus.OK if result.duplicate else HTTPStatus.CREATED
        self._send(status, {"submission": result.submission_id, "jobs": result.job_ids,
                            "duplicate": result.duplicate})
