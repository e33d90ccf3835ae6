"""Client of the controller's northbound API, for the launcher and the PS workers.

    c = ControllerClient("http://127.0.0.1:8080", admin_token=os.environ["SLUICE_ADMIN_TOKEN"])
    job = c.register_job("resnet-a", servers=[("10.0.0.1", 9000)],
                         workers=[("10.0.0.3", 9001), ("10.0.0.4", 9001)])
    c.progress("resnet-a", "w0", 12, job["token"])
    c.remove_job("resnet-a")

Standard library only (http.client, one keep-alive connection per client and thread).
Errors come back as :class:`ControllerError` with the HTTP status and the server's reason.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any, Iterable
from urllib.parse import quote, urlsplit


class ControllerError(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(f"controller answered {status}: {reason}")
        self.status, self.reason = status, reason


def _endpoints(items: Iterable, prefix: str) -> list[dict[str, Any]]:
    out = []
    for i, e in enumerate(items):
        if isinstance(e, dict):
            out.append(dict(e))
        else:
            ip, port = e
            out.append({"id": f"{prefix}{i}", "ip": ip, "port": int(port)})
    return out


class ControllerClient:
    def __init__(self, base_url: str = "http://127.0.0.1:8080", admin_token: str | None = None,
                 timeout: float = 5.0, *, token: str | None = None,
                 ssl_context=None) -> None:
        """``https://`` URLs use ``ssl_context`` (default: the system's trusted CAs, plus
        the PEM bundle named by env SLUICE_CA_FILE when set)."""
        url = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 8080
        self.https = url.scheme == "https"
        self.url = f"{url.scheme if self.https else 'http'}://{self.host}:{self.port}"
        if self.https and ssl_context is None:
            import os
            import ssl
            ssl_context = ssl.create_default_context(cafile=os.environ.get("SLUICE_CA_FILE"))
        self.ssl_context = ssl_context
        self.admin_token = admin_token or token     # ``token=`` is accepted as an alias
        self.timeout = timeout
        self._local = threading.local()

    # ---- transport -----------------------------------------------------------------
    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = (http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                                context=self.ssl_context) if self.https else
                    http.client.HTTPConnection(self.host, self.port, timeout=self.timeout))
            self._local.conn = conn
        return conn

    def request(self, method: str, path: str, body: Any = None, token: str | None = None):
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if method in ("POST", "PUT"):
            headers["Content-Length"] = str(len(data or b""))
        if token:
            headers["Authorization"] = f"Bearer {token}"
        for attempt in (1, 2):    # one retry when a kept-alive connection was closed
            conn = self._conn()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        if resp.getheader("Connection", "").lower() == "close":
            conn.close()
            self._local.conn = None
        text = raw.decode()
        is_json = resp.getheader("Content-Type", "").startswith("application/json")
        payload = json.loads(text) if is_json and text else text
        if resp.status >= 400:
            reason = payload.get("error") if isinstance(payload, dict) else text
            raise ControllerError(resp.status, reason)
        return payload

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ---- API -----------------------------------------------------------------------
    def register_job(self, job: str | dict, servers: Iterable | None = None,
                     workers: Iterable | None = None, wait: bool = False) -> dict[str, Any]:
        """Either a whole body ``{id, servers, workers}`` or ``(job_id, servers, workers)``
        with (ip, port) pairs (ids s0.., w0..) or {id, ip, port} dicts. Returns the job,
        including its per-job progress ``token``."""
        if isinstance(job, dict):
            body = job
        else:
            body = {"id": job, "servers": _endpoints(servers or [], "s"),
                    "workers": _endpoints(workers or [], "w")}
        return self.request("POST", "/jobs" + ("?wait=1" if wait else ""), body,
                            self.admin_token)

    def progress(self, job_id: str, worker: str, batch: int, token: str | None,
                 wait: bool = False) -> dict[str, Any]:
        """Report that ``worker`` of ``job_id`` is at ``batch`` (token: the job's token
        from registration). ``wait``: answer only once the switches applied the change."""
        path = f"/jobs/{quote(job_id)}/progress" + ("?wait=1" if wait else "")
        return self.request("POST", path, {"worker": worker, "batch": int(batch)}, token)

    def remove_job(self, job_id: str, wait: bool = False) -> dict[str, Any]:
        return self.request("DELETE", f"/jobs/{quote(job_id)}" + ("?wait=1" if wait else ""),
                            token=self.admin_token)

    def rank(self) -> dict[str, Any]:
        return self.request("GET", "/rank")

    def set_rank(self, rule: str, wait: bool = False) -> dict[str, Any]:
        """Switch the controller's ranking rule (progress | remaining | attained)."""
        return self.request("POST", "/rank" + ("?wait=1" if wait else ""), {"rule": rule},
                            self.admin_token)

    def _all_pages(self, path: str, key: str, query: str = "") -> dict[str, Any]:
        """A paged list (``?limit=&cursor=``) read to its end: the first page's answer
        with ``key`` holding every item."""
        first = None
        cursor = None
        while True:
            answer = self.request("GET", f"{path}?limit=1000{query}"
                                  + (f"&cursor={quote(cursor)}" if cursor else ""))
            if first is None:
                first = answer
            else:
                first[key] += answer[key]
            cursor = answer.get("next")
            if not cursor:
                first["next"] = None
                return first

    def jobs(self) -> list[dict[str, Any]]:
        return self._all_pages("/jobs", "jobs")["jobs"]

    def flows(self, job_id: str | None = None) -> dict[str, Any]:
        return self._all_pages("/flows", "flows", f"&job={quote(job_id)}" if job_id else "")

    def rules(self) -> list[dict[str, Any]]:
        return self._all_pages("/rules", "rules")["rules"]

    def links(self) -> dict[str, Any]:
        return self.request("GET", "/links")

    def metrics(self) -> str:
        return self.request("GET", "/metrics")

    def health(self) -> bool:
        return bool(self.request("GET", "/health").get("ok"))
