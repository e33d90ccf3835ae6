"""Twenty (or N) hostile clients, each sending its next hostile request as soon as the last
was answered, for a set time: one asyncio loop in a process of its own (so that the
load's own work does not sit in the valid client's latencies through the GIL).

Each client cycles through the kinds of bench/api/hostile_bodies.py (clients start at
different offsets, so every kind is in flight at once) on a keep-alive connection of its
own, reconnecting when the server closes it. Per kind it records the status codes, the
largest answer (bytes), the longest time to the answer, and the requests that got no
answer at all (connection closed or reset before an answer, or no answer in
``timeout_s``).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from bench.api.hostile_bodies import controller_kinds, scheduler_kinds
from bench.paced_http import Request, PacedConnection, encode, run


def new_stats() -> dict:
    return {"count": 0, "statuses": Counter(), "max_bytes": 0, "max_ms": 0.0,
            "no_answer": 0, "no_answer_kinds": Counter()}


async def one_client(index: int, kinds: list[tuple[str, int, Request]], deadline: float,
                     stats: dict[str, dict], timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    conn: PacedConnection | None = None
    ports: dict[int, PacedConnection] = {}
    k = index
    while time.monotonic() < deadline:
        name, port, request = kinds[k % len(kinds)]
        k += 1
        s = stats[name]
        s["count"] += 1
        t0 = time.monotonic()
        try:
            conn = ports.get(port)
            if conn is None or conn.closed:
                _, conn = await loop.create_connection(lambda: PacedConnection(loop),
                                                       "127.0.0.1", port)
                ports[port] = conn
            async with asyncio.timeout(timeout_s):
                status, body, keep = await conn.exchange(encode("127.0.0.1", request))
            s["statuses"][status] += 1
            s["max_bytes"] = max(s["max_bytes"], len(body))
            if not keep:
                conn.transport.close()
                conn.closed = True
        except (OSError, ConnectionError, TimeoutError) as err:
            s["no_answer"] += 1
            s["no_answer_kinds"][type(err).__name__] += 1
            if conn is not None:
                conn._fail(ConnectionError("request failed"))
            await asyncio.sleep(0.05)       # a refused connection: do not spin
        s["max_ms"] = max(s["max_ms"], (time.monotonic() - t0) * 1000)
    for conn in ports.values():
        if not conn.closed:
            conn.transport.close()


async def storm(kinds: list[tuple[str, int, Request]], seconds: float, clients: int,
                timeout_s: float) -> dict[str, dict]:
    stats = {name: new_stats() for name, _, _ in kinds}
    deadline = time.monotonic() + seconds
    # client i starts at kind i * len / clients: all kinds in flight from the start
    offsets = [i * len(kinds) // clients for i in range(clients)]
    await asyncio.gather(*(one_client(off, kinds, deadline, stats, timeout_s)
                           for off in offsets))
    return stats


def run_storm(sched_port: int, sched_token: str, ctl_port: int, ctl_token: str,
              job_id: str, job_token: str, seconds: float, clients: int = 20,
              timeout_s: float = 10.0) -> dict[str, dict]:
    """The storm against both services (a process's entry point: plain arguments, a
    picklable answer). Per kind: count, statuses {code: n}, max_bytes, max_ms,
    no_answer."""
    kinds = [(name, sched_port, req) for name, req in scheduler_kinds(sched_token).items()]
    kinds += [(name, ctl_port, req) for name, req in
              controller_kinds(ctl_token, job_id, job_token).items()]
    stats = run(storm(kinds, seconds, clients, timeout_s))
    for s in stats.values():
        s["statuses"] = dict(s["statuses"])
        s["no_answer_kinds"] = dict(s["no_answer_kinds"])
    return stats
