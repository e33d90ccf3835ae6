"""What both REST services share: uvicorn in a thread, the body-size limit, bearer tokens.

- :class:`ThreadedServer` runs an ASGI app (FastAPI) on uvicorn over a socket bound up
  front (port 0 picks a free one; its number is known before the server starts) and
  offers the ``serve_forever``/``shutdown``/``server_close`` of the standard library's
  servers, so the services start and stop as before.
- :class:`BodyLimit` is ASGI middleware: a request with a body must say its length
  (411 for a chunked one; a request with neither header has no body and is let
  through), and a body over the limit is refused (413) before a byte of it is read; the
  connection is closed so the unread bytes cannot be taken as the next request. A body
  without a Content-Type is taken as the API's own type (JSON for the controller).
- :func:`bearer_token` is the dependency that reads ``Authorization: Bearer <token>``
  (declared as an HTTP bearer security scheme in the OpenAPI document).
- :func:`serve_api_pages` serves ``/docs`` (Swagger UI) and ``/redoc`` with their scripts
  and styles from the service itself: FastAPI's own pages load them from a public CDN,
  which an offline cluster cannot reach (a blank page).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Callable

import uvicorn
from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

_bearer = HTTPBearer(auto_error=False)
API_PAGE_ASSETS = "/api-page-assets"     # the scripts and styles of /docs and /redoc


async def bearer_token(credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)
                       ) -> str | None:
    # async: a plain `def` dependency would run in the thread pool (a thread hop, ~0.3 ms
    # on every request)
    return credentials.credentials.strip() if credentials and credentials.credentials.strip() \
        else None


def serve_api_pages(app, title: str) -> None:
    """``/docs`` and ``/redoc`` for ``app`` (built with ``docs_url=None, redoc_url=None``),
    every asset under :data:`API_PAGE_ASSETS` on the service itself. The assets are the
    Swagger UI 5 and ReDoc bundles the ``fastapi-offline`` package ships (a dependency;
    Swagger UI 5: FastAPI's documents are OpenAPI 3.1, which Swagger UI 4 cannot show)."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    app.mount(API_PAGE_ASSETS, StaticFiles(directory=str(api_page_assets_dir())),
              name="api-page-assets")

    def at(request, path: str) -> str:    # behind a proxy that strips a prefix too
        return f"{request.scope.get('root_path', '')}{path}"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request):
        return get_swagger_ui_html(
            openapi_url=at(request, app.openapi_url), title=f"{title} - API",
            swagger_js_url=at(request, f"{API_PAGE_ASSETS}/swagger-ui-bundle.js"),
            swagger_css_url=at(request, f"{API_PAGE_ASSETS}/swagger-ui.css"),
            swagger_favicon_url=at(request, f"{API_PAGE_ASSETS}/favicon.png"),
            oauth2_redirect_url=None)

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request):
        return get_redoc_html(
            openapi_url=at(request, app.openapi_url), title=f"{title} - API",
            redoc_js_url=at(request, f"{API_PAGE_ASSETS}/redoc.standalone.js"),
            redoc_favicon_url=at(request, f"{API_PAGE_ASSETS}/favicon.png"),
            with_google_fonts=False)


def api_page_assets_dir() -> Path:
    """Where the installed ``fastapi-offline`` keeps the Swagger UI and ReDoc bundles."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def bearer_of(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (routes that read it
    themselves)."""
    scheme, _, token = (header or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def validation_messages(err: RequestValidationError | list[dict]) -> list[str]:
    """Every problem of a refused body, one line each (``body.workers[1].port: ...``)."""
    out = []
    for e in (err if isinstance(err, list) else err.errors()):
        if e.get("type") == "json_invalid":
            out.append(f"body is not valid JSON: {(e.get('ctx') or {}).get('error', e['msg'])}")
            continue
        loc = ""
        for part in e.get("loc", ()):
            loc += f"[{part}]" if isinstance(part, int) else (("." if loc else "") + str(part))
        out.append(f"{loc}: {e['msg']}" if loc else e["msg"])
    return out


class BodyLimit:
    """ASGI middleware: 411 without Content-Length, 413 over ``max_body`` bytes."""

    METHODS = {"POST", "PUT", "PATCH"}

    def __init__(self, app, max_body: int, error_body: Callable[[int, str], dict],
                 default_content_type: bytes | None = None,
                 content_types: tuple[bytes, ...] = ()):
        self.app, self.max_body, self.error_body = app, max_body, error_body
        self.default_content_type = default_content_type
        # bodies of any other type get 415 naming the first (empty: any type)
        self.content_types = content_types

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in self.METHODS:
            headers = dict(scope["headers"])
            length = headers.get(b"content-length")
            if self.default_content_type and b"content-type" not in headers:
                # `curl -d '{...}'` without -H: take the body as what the API speaks
                scope = {**scope, "headers": [*scope["headers"],
                                              (b"content-type", self.default_content_type)]}
            refusal = None
            if length is None and b"transfer-encoding" in headers:
                # a streamed body: its size is unknown until read, so it is refused
                refusal = (411, "a body must come with Content-Length (not chunked)")
            elif length is None:
                pass                       # no body at all (`curl -X POST`): nothing to read
            elif not length.strip().isdigit():
                refusal = (400, "bad Content-Length")
            elif int(length) > self.max_body:
                refusal = (413, f"body of {int(length)} bytes is over the "
                           f"{self.max_body}-byte limit")
            elif self.content_types and int(length) > 0:
                ctype = dict(scope["headers"]).get(b"content-type", b"")
                ctype = ctype.split(b";")[0].strip().lower()
                if ctype not in self.content_types:
                    want = self.content_types[0].decode()
                    refusal = (415, f"Content-Type {ctype.decode('latin-1')!r} is not "
                               f"{want}: send the body as JSON with Content-Type: {want}")
            if refusal:
                data = (json.dumps(self.error_body(*refusal)) + "\n").encode()
                await send({"type": "http.response.start", "status": refusal[0],
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(data)).encode()),
                                        (b"connection", b"close")]})
                await send({"type": "http.response.body", "body": data})
                return
        await self.app(scope, receive, send)


class JsonBodyBounds:
    """ASGI middleware: a JSON body over one of the bounds of
    :mod:`sluice_common.body_bounds` (depth, values, string and number sizes) is refused
    with 400 before the route's parser (``json.loads``, pydantic) sees it. It runs inside
    :class:`BodyLimit`, so the body it reads is at most that limit."""

    def __init__(self, app, error_body: Callable[[int, str], dict]):
        self.app, self.error_body = app, error_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in BodyLimit.METHODS:
            return await self.app(scope, receive, send)
        body = await read_body(receive)
        if body is None:                          # the client went away
            return
        refused = json_bounds_refusal(body)
        if refused:
            data = (json.dumps({**self.error_body(400, refused), "errors": [refused]})
                    + "\n").encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()
        await self.app(scope, replay, send)


async def read_body(receive) -> bytes | None:
    """The whole body of an ASGI request (None: the client disconnected first)."""
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


def json_bounds_refusal(body: bytes) -> str | None:
    """Why the JSON ``body`` is refused before parsing (None: within the bounds)."""
    from sluice_common.body_bounds import BoundsError, check_json

    try:
        check_json(body)
    except BoundsError as err:
        return f"body refused before parsing: {err.reason}"
    return None


def allowed_methods(app, path: str) -> str:
    """The ``Allow`` header of a 405: every method of every route of ``path`` (starlette
    names only the first route that matches the path, e.g. GET of GET+POST /jobs)."""
    methods: set[str] = set()
    for route in getattr(app, "routes", ()):
        regex = getattr(route, "path_regex", None)
        if regex is not None and regex.match(path) and getattr(route, "methods", None):
            methods |= set(route.methods)
    return ", ".join(sorted(methods))


def http_error_reason(app, request, err, not_found: str) -> tuple[str, dict | None]:
    """The ``error`` and headers of an answer to starlette's HTTPException: a 404 names
    the method and path after ``not_found``, a 405 the methods the path has (``Allow``)."""
    headers = getattr(err, "headers", None)
    if err.status_code == 405:
        allow = allowed_methods(app, request.url.path)
        return (f"{request.method} is not a method of {request.url.path} (Allow: {allow})",
                {**(headers or {}), "Allow": allow})
    if err.status_code == 404:
        return f"{not_found}{request.method} {request.url.path}", headers
    return str(err.detail), headers


def page_of(items: list, key: str, limit: int, cursor: str | None) -> dict:
    """One page of a list answer: ``{key: items[cursor:cursor+limit], next, total}``;
    the cursor is the offset of the page's first item (an opaque string to clients)."""
    start = int(cursor) if cursor else 0
    chunk = items[start:start + limit]
    more = start + limit < len(items)
    return {key: chunk, "next": str(start + limit) if more else None, "total": len(items)}


class ThreadedServer:
    """uvicorn serving ``app`` on ``host:port`` (0: a free port)."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0,
                 tls: tuple[str, str] | None = None):
        # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only
        # for sockets that say they are TCP, and without it Nagle + the client's delayed
        # ACK add ~40 ms to every keep-alive request (measured: 44 ms -> 0.5 ms).
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(1024)
        self.server_address = self.sock.getsockname()[:2]
        self.host, self.port = self.server_address
        # access_log off: the log line would carry nothing a token could leak through, but
        # per-request logging costs the controller reaction latency.
        # tls: (certificate, private key) PEM files -> HTTPS only (uvicorn's ssl options)
        self.tls = tls
        ssl_files = {"ssl_certfile": tls[0], "ssl_keyfile": tls[1]} if tls else {}
        self.server = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off",
            timeout_keep_alive=30, server_header=False, **ssl_files))
        self._thread: threading.Thread | None = None
        self._serving, self._stopped = threading.Event(), threading.Event()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def serve_forever(self, poll_interval: float | None = None) -> None:
        self._serving.set()
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self._stopped.set()

    def start(self, timeout: float = 10.0) -> "ThreadedServer":
        self._thread = threading.Thread(target=self.serve_forever, name="sluice-http",
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started and self._thread.is_alive():
            if time.monotonic() > deadline:
                raise RuntimeError(f"HTTP server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def shutdown(self) -> None:
        """Stop serving and wait until uvicorn has let go of the socket (from any thread
        but the serving one)."""
        self.server.should_exit = True
        if self._serving.is_set() and threading.current_thread() is not self._thread:
            self._stopped.wait(timeout=10)

    def server_close(self) -> None:
        self.sock.close()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()



def check_tls_files(cert: str | None, key: str | None) -> tuple[str, str] | None:
    """Both or neither; they must load as a certificate and its key (else InputError;
    the option error's field: ``tls``, the CLI names its flags)."""
    import ssl

    from sluice_common.errors import InputError, option_error

    if not cert and not key:
        return None
    if not (cert and key):
        raise option_error("tls", "give both or neither")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        raise InputError(cert, f"cannot load certificate/key: {err}")
    return cert, key


def document_400_for_bad_requests(app, extra_schemas: list = (), max_body: int | None = None
                                  ) -> None:
    """The services answer a refused body with 400 (every problem listed), not FastAPI's
    default 422: say so in the OpenAPI document. ``extra_schemas``: models that routes
    reading their own body refer to. Every request body states the bounds it is held to
    (``max_body`` bytes and sluice_common.body_bounds.LIMITS) in its description and as
    ``x-sluice-body-bounds``."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            doc = build()
            schemas = doc.setdefault("components", {}).setdefault("schemas", {})
            for model in extra_schemas:
                schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
                schemas.update(schema.pop("$defs", {}))
                schemas[model.__name__] = schema
            for ops in doc.get("paths", {}).values():
                for op in ops.values():
                    if "requestBody" in op:
                        _document_bounds(op["requestBody"], max_body)
                    responses = op.get("responses", {})
                    if responses.get("422", {}).get("description") == "Validation Error":
                        moved = responses.pop("422")      # FastAPI's own, not the route's
                        if "Error" in schemas:     # what the services really answer
                            moved = {"content": {"application/json": {"schema": {
                                "$ref": "#/components/schemas/Error"}}}}
                        responses.setdefault("400", {**moved, "description":
                                                     "bad request: every problem listed"})
            for unused in ("HTTPValidationError", "ValidationError"):
                if "Error" in schemas and f"/{unused}\"" not in json.dumps(doc["paths"]):
                    schemas.pop(unused, None)
            app.openapi_schema = doc
        return app.openapi_schema
    app.openapi = openapi


def _document_bounds(body: dict, max_body: int | None) -> None:
    from sluice_common.body_bounds import LIMITS

    said = f"at most {max_body:,} bytes, " if max_body else ""
    body["description"] = (body.get("description", "") + f" Bounds: {said}"
                           f"{LIMITS.describe()}; a body over one is refused with 400 "
                           "before it is parsed.").strip()
    body["x-sluice-body-bounds"] = {**({"max_bytes": max_body} if max_body else {}),
                                    **LIMITS.openapi_extension()}
