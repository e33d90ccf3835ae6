"""Open-loop paced HTTP/1.1 requests over keep-alive connections, on one event loop.

A load from 64 threads of ``http.client`` costs about 0.2 ms of CPU per
request, as much as the controller spends answering it, and on a host with two cores the
client's own thread switching under the GIL lands in the latencies it measures. Here one
asyncio loop (uvloop, which uvicorn uses too) writes each request whole and parses the
answers with httptools (uvicorn's C parser): a few tens of microseconds per request.

:func:`run_paced` sends request ``n`` at ``t0 + n / rate`` on a free connection of the
pool; the latency of a request runs from the moment it is written to the moment its
answer is parsed. When the server falls behind, every connection is busy and requests
leave late: how late is recorded (``send_lag_ms``), and a request more than ``late_s``
behind its schedule is not sent at all (``unsent``), so a stalled server cannot make the
load pile up forever.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable

import httptools

Request = tuple[str, str, dict[str, str], bytes]      # method, target, headers, body


class PacedConnection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, answers parsed by httptools."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.transport = loop, None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future | None = None
        self.body: list[bytes] = []
        self.closed = False

    # asyncio protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(ConnectionError(f"bad HTTP answer: {err}"))

    def connection_lost(self, exc) -> None:
        self.closed = True
        self._fail(exc or ConnectionError("connection closed by the server"))

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.body = []

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result((self.parser.get_status_code(), b"".join(self.body),
                                    self.parser.should_keep_alive()))

    def _fail(self, err: BaseException) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(err)
        if self.transport is not None:
            self.transport.close()

    async def exchange(self, raw: bytes) -> tuple[int, bytes, bool]:
        self.waiter = self.loop.create_future()
        self.transport.write(raw)
        return await self.waiter


def encode(host: str, request: Request) -> bytes:
    method, target, headers, body = request
    head = [f"{method} {target} HTTP/1.1", f"Host: {host}",
            f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class PacedResult:
    records: list[tuple[float, float, bool]] = field(default_factory=list)
    """per request sent: (scheduled time - t0 in s, latency in ms, answered as wanted)"""
    unsent: int = 0                 # skipped: more than late_s behind the schedule
    send_lag_ms: list[float] = field(default_factory=list)   # sent time - scheduled time
    reconnects: int = 0


async def run_paced(host: str, port: int, rate: float, seconds: float,
                    request_of: Callable[[int], Request],
                    answered: Callable[[int, int, bytes], bool],
                    connections: int = 64, timeout_s: float = 10.0,
                    late_s: float = 5.0) -> PacedResult:
    """Send ``request_of(n)`` for n < rate * seconds at t0 + n / rate; ``answered(n,
    status, body)`` says whether the answer is the one wanted (False: counted as an
    error). A connection that fails or times out is replaced; its request is an error."""
    loop = asyncio.get_running_loop()
    out = PacedResult()
    free: asyncio.Queue = asyncio.Queue()
    for _ in range(connections):
        free.put_nowait(None)              # a slot; connected on first use
    interval, total = 1.0 / rate, int(rate * seconds)
    tasks: set[asyncio.Task] = set()

    async def one(n: int, due: float, conn: PacedConnection | None) -> None:
        start = time.monotonic()
        ok = False
        try:
            if conn is None or conn.closed:
                if conn is not None:
                    out.reconnects += 1
                _, conn = await loop.create_connection(lambda: PacedConnection(loop), host, port)
            async with asyncio.timeout(timeout_s):
                status, body, keep = await conn.exchange(encode(host, request_of(n)))
            ok = answered(n, status, body)
            if not keep:
                conn.transport.close()
                conn.closed = True
        except (OSError, ConnectionError, TimeoutError):
            if conn is not None:
                conn._fail(ConnectionError("request failed"))
        out.records.append((due - t0, (time.monotonic() - start) * 1000, ok))
        free.put_nowait(conn)

    t0 = time.monotonic()
    n = 0
    while n < total:
        due = t0 + n * interval
        now = time.monotonic()
        if due > now:
            await asyncio.sleep(due - now)
        conn = await free.get()            # every connection busy: this request is late
        now = time.monotonic()
        if now - due > late_s:             # far behind: skip to the present
            skip_to = min(total, int((now - t0) / interval))
            out.unsent += skip_to - n
            n = skip_to
            free.put_nowait(conn)
            continue
        out.send_lag_ms.append((now - due) * 1000)
        task = loop.create_task(one(n, due, conn))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
    if tasks:
        await asyncio.wait(list(tasks))
    while not free.empty():
        conn = free.get_nowait()
        if conn is not None and not conn.closed:
            conn.transport.close()
    return out


def run(coroutine):
    """Run on uvloop where it is installed (as uvicorn does), else asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)
