"""The load of bench/controller/bench_scale.py: every worker of every emulated job reporting
through the real client logic (ps_runtime.progress.ReportGate, fed the controller's
answers), on one asyncio loop over keep-alive HTTP connections.

Only the reports cost anything here: a worker's next report time follows from its job's
step times and its gate (the batch its hint names, the staleness bound, or today's
``min_interval`` without a hint), so the loop wakes when a report may be due and asks
the gate, never at every batch. Jobs that finish are removed and a new job arrives in
their place (registered over the API like the scheduler does).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import random
import time
from dataclasses import dataclass, field

from bench.controller.scale_cluster import EmulatedJob, new_job, token_of
from bench.paced_http import PacedConnection, encode
from ps_runtime.progress import ReportGate

MIN_INTERVAL_S = 0.2          # today's client: at most a report every 0.2 s


@dataclass
class Figures:
    """What the load saw, from ``window_start`` on (bench clock, s)."""
    window_start: float
    reports: int = 0                   # sent in the window
    answered: int = 0
    lost: int = 0                      # not answered 200 (any time)
    level_changes_ms: list[float] = field(default_factory=list)   # controller: report -> barrier
    level_changes_rtt_ms: list[float] = field(default_factory=list)
    not_applied: int = 0               # a level change the switches did not confirm in 10 s
    arrivals: int = 0
    removals: int = 0
    admin_errors: list[str] = field(default_factory=list)
    admin_ms: list[float] = field(default_factory=list)   # register/remove, to barrier
    acked: dict = field(default_factory=dict)     # (job, worker) -> batch answered 200


class Pool:
    def __init__(self, host: str, port: int, size: int) -> None:
        self.host, self.port = host, port
        self.free: asyncio.Queue = asyncio.Queue()
        for _ in range(size):
            self.free.put_nowait(None)

    async def request(self, method: str, target: str, headers: dict, body: bytes,
                      timeout: float = 30.0) -> tuple[int, bytes]:
        conn = await self.free.get()
        try:
            if conn is None or conn.closed:
                loop = asyncio.get_running_loop()
                _, conn = await loop.create_connection(lambda: PacedConnection(loop),
                                                       self.host, self.port)
            async with asyncio.timeout(timeout):
                status, data, keep = await conn.exchange(
                    encode(self.host, (method, target, headers, body)))
            if not keep:
                conn.transport.close()
                conn.closed = True
            return status, data
        except (OSError, ConnectionError, TimeoutError):
            if conn is not None:
                conn._fail(ConnectionError("request failed"))
            raise
        finally:
            self.free.put_nowait(conn)


class Load:
    def __init__(self, topology, jobs: list[EmulatedJob], pool: Pool, admin: Pool,
                 admin_token: str, per_job: int, seed: int, figures: Figures) -> None:
        self.topology, self.pool, self.admin, self.per_job = topology, pool, admin, per_job
        self.admin_token, self.fig = admin_token, figures
        self.rng = random.Random(seed + 1)
        self.jobs: dict[int, EmulatedJob] = {j.slot: j for j in jobs}
        self.tokens = {j.id: token_of(j.id) for j in jobs}
        self.gates: dict[tuple[str, str], ReportGate] = {}
        self.events: list = []
        self.seq = itertools.count()
        self.t0 = 0.0
        self.tasks: set[asyncio.Task] = set()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def push(self, t: float, kind: str, *payload) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, payload))

    async def run(self, seconds: float, spread_s: float = 2.0) -> None:
        """The load for ``seconds``: each worker's first report within ``spread_s``."""
        self.t0 = time.monotonic()
        for job in self.jobs.values():
            self._start(job, spread_s)
        while True:
            now = self.now()
            if now >= seconds:
                break
            if not self.events or self.events[0][0] > now:
                wake = min(seconds, self.events[0][0] if self.events else seconds)
                await asyncio.sleep(max(0.0, wake - now))
                continue
            _, _, kind, payload = heapq.heappop(self.events)
            if kind == "check":
                self._check(*payload)
            else:
                self._spawn(self._replace(*payload))
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=15)

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _start(self, job: EmulatedJob, spread_s: float) -> None:
        for w in job.body["workers"]:
            self.gates[(job.id, w["id"])] = ReportGate(MIN_INTERVAL_S)
            first = max(job.started, 0.0) + self.rng.uniform(0, spread_s)
            self.push(first, "check", job, w["id"])
        self.push(job.ends, "end", job)

    def _check(self, job: EmulatedJob, worker: str) -> None:
        gate = self.gates.get((job.id, worker))
        if gate is None or self.jobs.get(job.slot) is not job:
            return                              # the job is gone
        now = self.now()
        batch = job.batch_at(now)
        if batch > job.batches:
            return                              # done: its removal follows
        wait = gate.wait_s(batch, now)
        if wait == 0:
            self._spawn(self._report(job, worker, batch, gate))
        else:
            self._next_check(job, worker, gate, now, wait)

    def _next_check(self, job: EmulatedJob, worker: str, gate: ReportGate, now: float,
                    wait: float | None) -> None:
        """When the gate may next say yes: the hint's batch, the staleness bound or the
        rate limit, and never before the batch moves."""
        batch = job.batch_at(now)
        moved = job.time_of(batch + 1) if batch == gate.sent else now
        if not gate.hinted:
            due = gate.last_send + gate.min_interval if gate.last_send is not None else now
        else:
            dues = []
            if gate.hint_batch is not None:
                dues.append(job.time_of(gate.hint_batch))
            if gate.within_s is not None:
                dues.append(gate.last_send + gate.within_s)
            if not dues:
                return                          # nothing it does matters any more
            due = min(dues)
        if wait is not None:
            due = max(due, now + wait)
        self.push(max(due, moved, now + 1e-4), "check", job, worker)

    async def _report(self, job: EmulatedJob, worker: str, batch: int,
                      gate: ReportGate) -> None:
        sent = self.now()
        in_window = sent >= self.fig.window_start
        self.fig.reports += in_window
        body = b'{"worker":"%s","batch":%d}' % (worker.encode(), batch)
        answer = None
        try:
            status, data = await self.pool.request(
                "POST", f"/jobs/{job.id}/progress?wait=1",
                {"Authorization": f"Bearer {self.tokens[job.id]}",
                 "Content-Type": "application/json"}, body)
            if status == 200:
                answer = json.loads(data)
                self._answered(job, worker, batch, answer, sent, in_window)
            elif self.jobs.get(job.slot) is job:      # a removed job's late report: 404
                self.fig.lost += 1
        except (OSError, ConnectionError, TimeoutError):
            self.fig.lost += 1
        now = self.now()
        gate.sent_at(batch, now, answer)
        if self.gates.get((job.id, worker)) is gate:
            self._next_check(job, worker, gate, now, gate.wait_s(job.batch_at(now), now))

    def _answered(self, job, worker, batch, answer, sent, in_window) -> None:
        self.fig.answered += 1
        key = (job.id, worker)
        if answer.get("result") == "accepted":
            self.fig.acked[key] = max(self.fig.acked.get(key, 0), batch)
        if answer.get("changed_rules", 0) > 0 and in_window:
            if answer.get("applied"):
                self.fig.level_changes_ms.append(answer["latency_ms"])
                self.fig.level_changes_rtt_ms.append((self.now() - sent) * 1000)
            else:
                self.fig.not_applied += 1

    async def _replace(self, job: EmulatedJob) -> None:
        """The job is done: the scheduler removes it and the next one arrives in its place."""
        del self.jobs[job.slot]
        for w in job.body["workers"]:
            self.gates.pop((job.id, w["id"]), None)
        auth = {"Authorization": f"Bearer {self.admin_token}",
                "Content-Type": "application/json"}
        t0 = time.monotonic()
        status, data = await self.admin.request("DELETE", f"/jobs/{job.id}?wait=1", auth, b"")
        self.fig.admin_ms.append((time.monotonic() - t0) * 1000)
        self.fig.removals += 1
        if status != 200:
            self.fig.admin_errors.append(f"DELETE {job.id}: {status} {data[:200]!r}")
        gen = int(job.id.rsplit("-", 1)[1]) + 1
        nxt = new_job(self.topology, self.rng, job.slot, gen, self.per_job, self.now())
        t0 = time.monotonic()
        status, data = await self.admin.request("POST", "/jobs?wait=1", auth,
                                                json.dumps(nxt.body).encode())
        self.fig.admin_ms.append((time.monotonic() - t0) * 1000)
        if status != 201:
            self.fig.admin_errors.append(f"POST {nxt.id}: {status} {data[:200]!r}")
            return
        self.fig.arrivals += 1
        self.tokens[nxt.id] = json.loads(data)["token"]
        self.jobs[nxt.slot] = nxt
        self._start(nxt, 0.0)
