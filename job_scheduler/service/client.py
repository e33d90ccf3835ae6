"""A small client for the scheduler service's HTTP API (used by the CLI, tests, bench).

``submit`` sends an ``Idempotency-Key``; when the connection breaks before the answer
(the service was killed or restarted), it retries with the same key until
``retry_seconds`` pass, so a submission is queued exactly once or reported as failed.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import uuid
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

DEFAULT_URL = "http://127.0.0.1:8181"
TOKEN_ENV = "SLUICE_SCHEDULER_TOKEN"
URL_ENV = "SLUICE_SCHEDULER_URL"


class ServiceError(Exception):
    """The service answered with an error status; ``body`` is its JSON answer."""

    def __init__(self, status: int, body: dict):
        self.status = status
        self.body = body
        super().__init__(f"HTTP {status}: {body.get('error', body)}")


class Unreachable(Exception):
    pass


@dataclass
class SchedulerClient:
    url: str = DEFAULT_URL
    token: str | None = None
    timeout: float = 10.0

    def __post_init__(self):
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"scheduler URL must look like http(s)://HOST:PORT, got {self.url!r}")
        self._host, self._port = parts.hostname, parts.port or 80
        self._ssl = None
        if parts.scheme == "https":   # trusts the system CAs plus SLUICE_CA_FILE when set
            import ssl
            self._ssl = ssl.create_default_context(cafile=os.environ.get("SLUICE_CA_FILE"))

    @classmethod
    def from_env(cls, url: str | None = None, token: str | None = None) -> "SchedulerClient":
        return cls(url or os.environ.get(URL_ENV) or DEFAULT_URL,
                   token if token is not None else os.environ.get(TOKEN_ENV))

    def _request(self, method: str, path: str, body: bytes | None = None,
                 headers: dict[str, str] | None = None) -> tuple[int, dict]:
        conn = (http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout,
                                            context=self._ssl) if self._ssl else
                http.client.HTTPConnection(self._host, self._port, timeout=self.timeout))
        try:
            hdrs = dict(headers or {})
            if self.token:
                hdrs["Authorization"] = f"Bearer {self.token}"
            if body is not None or method == "POST":
                hdrs["Content-Length"] = str(len(body or b""))
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as err:
            raise Unreachable(f"cannot reach the scheduler at {self.url}: {err}") from err
        finally:
            conn.close()
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            data = {"error": raw[:200].decode(errors="replace")}
        if resp.status >= 400:
            raise ServiceError(resp.status, data)
        return resp.status, data

    def health(self) -> dict:
        return self._request("GET", "/health")[1]

    def jobs(self, state: str | None = None, page: int = 1000) -> list[dict]:
        """Every job (in the given state): the pages of ``GET /jobs``, following ``next``."""
        out: list[dict] = []
        cursor = None
        while True:
            query = {"limit": page, **({"state": state} if state else {}),
                     **({"cursor": cursor} if cursor else {})}
            answer = self._request("GET", "/jobs?" + urlencode(query))[1]
            out += answer["jobs"]
            cursor = answer.get("next")
            if not cursor:
                return out

    def job(self, job_id: int) -> dict:
        return self._request("GET", f"/jobs/{int(job_id)}")[1]

    def cancel(self, job_id: int) -> dict:
        return self._request("POST", f"/jobs/{int(job_id)}/cancel", b"")[1]

    def submit(self, text: str, source: str = "API body", key: str | None = None,
               retry_seconds: float = 0.0) -> dict:
        """POST one job file; returns {submission, jobs, duplicate}. Retries on a broken
        connection, a 503 (not stored) or a 429 (every check slot busy; never on other
        HTTP errors) with the same idempotency key, so a retry can never queue the file
        twice."""
        key = key or uuid.uuid4().hex
        headers = {"Content-Type": "application/yaml", "Idempotency-Key": key,
                   "X-Sluice-Source": source}
        deadline = time.monotonic() + retry_seconds
        while True:
            try:
                return self._request("POST", "/submissions", text.encode("utf-8"), headers)[1]
            except (Unreachable, ServiceError) as err:
                if isinstance(err, ServiceError) and err.status not in (429, 503):
                    raise
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
