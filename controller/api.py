"""Northbound JSON-over-HTTP API (standard library ``ThreadingHTTPServer``; os-ken 4.x has
no WSGI module).

    POST   /jobs[?wait=1]              admin token   register {id, servers, workers}
    DELETE /jobs/{id}[?wait=1]         admin token   remove the job and its rules
    POST   /jobs/{id}/progress[?wait=1] job token    {worker, batch}; wait=1 answers after
                                                      the switches' barrier replies
    POST   /rank                       admin token   {rule}: progress|remaining|attained
    GET    /jobs | /flows[?job=ID] | /rules | /links | /rank | /metrics | /health

Tokens travel as ``Authorization: Bearer <token>``. Answers: 400 bad body (with the
reason), 401 missing/wrong token, 404 unknown job or path, 409 conflict, 411/413 missing
or oversized body, 429 too many reports. A refused request changes nothing. The request
log line has method, path and status only: tokens are never logged.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from controller.service import ApiError, ControllerService

LOG = logging.getLogger("sluice.controller.api")
MAX_BODY = 64 * 1024
WAIT_TIMEOUT_S = 10.0
_JOB = r"/jobs/([A-Za-z0-9][A-Za-z0-9._-]{0,63})"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"     # keep-alive: workers report many times per second
    server_version = "sluice-controller"
    service: ControllerService        # set on the subclass made by ApiServer

    # ---- plumbing ------------------------------------------------------------------
    def setup(self):
        super().setup()
        # Headers and body are separate writes: without NODELAY, Nagle + the client's
        # delayed ACK add ~40 ms to every keep-alive request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):   # never the headers (tokens)
        LOG.debug("%s %s", self.address_string(), fmt % args)

    def _reply(self, status: int, body, content_type="application/json") -> None:
        data = (body if isinstance(body, str) else json.dumps(body, indent=None)).encode()
        if content_type == "application/json" and not data.endswith(b"\n"):
            data += b"\n"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, reason: str) -> None:
        self._reply(status, {"error": reason, "status": status})

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        return token.strip() if scheme.lower() == "bearer" and token.strip() else None

    def _body(self):
        length = self.headers.get("Content-Length")
        if length is None:
            raise ApiError(411, "a JSON body with Content-Length is required")
        try:
            n = int(length)
        except ValueError:
            raise ApiError(400, "bad Content-Length")
        if n > MAX_BODY:
            self.close_connection = True      # do not read (or keep) an oversized body
            raise ApiError(413, f"body larger than {MAX_BODY} bytes")
        raw = self.rfile.read(n)
        self._consumed = True
        try:
            return json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, ValueError) as err:
            raise ApiError(400, f"body is not valid JSON: {err}")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        self._consumed = False
        try:
            status, body = self._route(method, url.path.rstrip("/") or "/", query)
            if isinstance(body, str):
                self._reply(status, body, "text/plain; version=0.0.4")
            else:
                self._reply(status, body)
        except ApiError as err:
            if not self._consumed and self.headers.get("Content-Length", "0") != "0":
                self.close_connection = True  # an unread body would corrupt the next request
            self._error(err.status, err.reason)
        except Exception:          # a bug must not kill the server thread silently
            LOG.exception("API %s %s", method, url.path)
            self._error(500, "internal error (see controller log)")

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    @staticmethod
    def _maybe_wait(query: dict, answer: dict, done: threading.Event, t0: float) -> dict:
        """``?wait=1``: answer once the switches confirmed the change (barrier replies)."""
        if query.get("wait", ["0"])[0] not in ("0", ""):
            answer["applied"] = done.wait(WAIT_TIMEOUT_S)
            answer["latency_ms"] = round((time.monotonic() - t0) * 1000, 3)
        return answer

    # ---- routes ----------------------------------------------------------------------
    def _route(self, method: str, path: str, query: dict):
        s = self.service
        if method == "GET":
            if path == "/health":
                return 200, {"ok": True}
            if path == "/jobs":
                return 200, {"jobs": s.jobs()}
            if path == "/flows":
                return 200, s.flows(query.get("job", [None])[0])
            if path == "/rules":
                return 200, {"rules": s.rules()}
            if path == "/links":
                return 200, s.links()
            if path == "/metrics":
                return 200, s.metrics_text()
            if path == "/rank":
                return 200, s.rank()
            raise ApiError(404, f"no such path: {path}")
        if method == "POST" and path == "/jobs":
            token = self._token()
            s.check_admin(token)                 # 401 before even reading the body
            body = self._body()
            t0, done = time.monotonic(), threading.Event()
            answer = s.register_job(token, body, done)
            return 201, self._maybe_wait(query, answer, done, t0)
        if method == "POST" and path == "/rank":
            token = self._token()
            s.check_admin(token)
            t0, done = time.monotonic(), threading.Event()
            return 200, self._maybe_wait(query, s.set_rank(token, self._body(), done), done, t0)
        m = re.fullmatch(_JOB + r"/progress", path)
        if method == "POST" and m:
            t0 = time.monotonic()
            body = self._body()
            answer, done = s.progress(m.group(1), self._token(), body, t0=t0)
            return 200, self._maybe_wait(query, answer, done, t0) if done else answer
        m = re.fullmatch(_JOB, path)
        if method == "DELETE" and m:
            t0, done = time.monotonic(), threading.Event()
            answer = s.remove_job(self._token(), m.group(1), done)
            return 200, self._maybe_wait(query, answer, done, t0)
        raise ApiError(404, f"no such path: {method} {path}")


class ApiServer:
    """The HTTP server in its own thread. ``port=0`` picks a free port (tests)."""

    def __init__(self, service: ControllerService, host: str = "127.0.0.1", port: int = 8080):
        handler = type("Handler", (_Handler,), {"service": service})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "ApiServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="sluice-api",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
