"""Soak: the load the controller and the scheduler service hold over time.

    .venv/bin/python -m bench.reliability.soak [--minutes 10] [--rate 2000] [--sub-rate 50]
        [--jobs 100] [--workers 8] [--queued 10000] [--json OUT.json] [--out DIR]

Both run as their own processes, side by side, for ``--minutes``:

- controller: the controller's service (registry, ranking, rule diff, progress
  journal) behind its real northbound HTTP API, with ``--jobs`` jobs of ``--workers``
  workers registered on leaf-spine and every switch "connected" to an in-memory flow
  table (controller.fake_fabric: the rules are computed, diffed and applied exactly as
  for OVS, only not serialised to OpenFlow). A load process sends ``--rate`` progress
  reports/s (each worker advancing batch by batch, ``?wait=1``: answered once the rule
  changes were applied), paced open-loop over 64 keep-alive connections.
- scheduler: `sluice scheduler` (simulated executor, fifo policy) holding ``--queued``
  queued jobs (the GPUs are taken by jobs that last for hours), while a load process
  submits ``--sub-rate`` one-job files/s; each answer means the file was committed.

Every 10 s window: the reports/submissions answered per second, latency p50/p99 (client
side, HTTP round trip), errors, and the server processes' RSS. "Lost": a report not
answered 200, or an acknowledged batch the controller does not hold at the end; a
submission not answered 201. Memory growth is measured from the end of the warm-up
(the first fifth of the run, at most 2 minutes) to the end. Then a ramp (each rate for
10 s) finds where each starts to fall behind: the first rate at which fewer than 95 %
of the offered requests are answered within 1 s, any had to be skipped, or p99 exceeds
50 ms (default ramps: 250-4,000 reports/s, 25-400 submissions/s).
"""

from __future__ import annotations

import collections
import http.client
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from ps_runtime.ports import free_port

from bench import harness
from bench.harness import ROOT
# the analysis (pure) and the plot: their own module
from bench.reliability.soak_analysis import pct, plot, side_summary

ADMIN = "soak-admin-token-0123"
TOPOLOGY = "leaf-spine"
LATE_S = 5.0          # a load generator this far behind its schedule skips ahead


def log(text: str) -> None:
    print(f"soak: {text}", file=sys.stderr, flush=True)




def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# ============================================================ controller server ======
def serve_controller(port: int, state: str, jobs: int, workers: int) -> None:
    """The controller's service + HTTP API on a fake fabric (its own process)."""
    import logging

    from controller.api import ApiServer
    from controller.client import ControllerClient
    from controller.fake_fabric import bring_up
    from controller.service import ControllerService
    from controller.sinks import TableSink
    from controller.config import ControllerConfig
    from topologies import load_topology

    logging.basicConfig(level=logging.WARNING)
    topo = load_topology(TOPOLOGY)
    svc = ControllerService(ControllerConfig(topology=topo, admin_token=ADMIN,
                                             state_file=Path(state), rate_per_s=1e6),
                            sink=TableSink())
    # TableSink keeps every flow mod it was sent (for tests): keep none here, or the
    # soak would measure that history growing instead of the controller
    svc.sink.sent = collections.deque(maxlen=0)
    bring_up(svc)
    api = ApiServer(svc, "127.0.0.1", port).start()
    client = ControllerClient(api.url, ADMIN)
    tokens = {}
    ips = [h.ip for h in topo.hosts]
    for j in range(jobs):
        body = {"id": f"soak-{j:03d}",
                "servers": [{"id": "s0", "ip": ips[j % len(ips)], "port": 20000 + j}],
                "workers": [{"id": f"w{w}", "ip": ips[(j + 1 + w) % len(ips)],
                             "port": 30000 + j * workers + w} for w in range(workers)]}
        tokens[body["id"]] = client.register_job(body)["token"]
    Path(state + ".tokens").write_text(json.dumps(tokens))
    signal.sigwait([signal.SIGTERM])
    os._exit(0)


# ============================================================ load generators ========
class Paced:
    """Open-loop pacing of ``rate`` calls/s over ``threads`` threads; records per call
    (scheduled time, latency ms, ok)."""

    def __init__(self, rate: float, threads: int, call) -> None:
        self.rate, self.threads, self.call = rate, threads, call
        self.records: list[tuple[float, float, bool]] = []
        self.unsent = 0
        self.lock = threading.Lock()

    def run(self, seconds: float, t0: float) -> None:
        """Calls due at t0 + n / rate for n < rate * seconds. A thread more than LATE_S
        behind its schedule skips to the present: the calls it skipped are ``unsent``
        (the server fell behind), and the load goes on for the whole phase."""
        total = int(self.rate * seconds)

        def worker(k: int) -> None:
            ctx = {}
            n = k
            interval = 1.0 / self.rate
            while n < total:
                due = t0 + n * interval
                now = time.monotonic()
                if now - due > LATE_S:
                    skip_to = int((now - t0) / interval)
                    skip_to += (k - skip_to) % self.threads      # stay on this thread's slots
                    with self.lock:
                        self.unsent += len(range(n, min(skip_to, total), self.threads))
                    n = skip_to
                    continue
                if due > now:
                    time.sleep(due - now)
                start = time.monotonic()
                try:
                    ok = self.call(ctx, n)
                except Exception:
                    ok = False
                    ctx.clear()
                end = time.monotonic()
                with self.lock:
                    self.records.append((due - t0, (end - start) * 1000, ok))
                n += self.threads

        ts = [threading.Thread(target=worker, args=(k,)) for k in range(self.threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()


def _conn(ctx: dict, port: int) -> http.client.HTTPConnection:
    conn = ctx.get("conn")
    if conn is None:
        conn = ctx["conn"] = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    return conn


def controller_load(port: int, tokens: dict, workers: int, phases, out: mp.Queue,
                    connections: int = 64) -> None:
    """phases: [(rate, seconds)]. Each worker of each job reports batch 1, 2, 3, ...
    One asyncio loop paces the reports over ``connections`` keep-alive connections
    (bench/paced_http.py: a thread-per-connection client cost as much CPU as the
    controller and added its own thread switching to the latencies)."""
    from bench import paced_http

    jobs = sorted(tokens)
    acked: dict[tuple[str, str], int] = {}
    slots = len(jobs) * workers
    auth = {job: f"Bearer {tokens[job]}" for job in jobs}

    def report(n: int) -> tuple[str, int, int]:
        return jobs[n % len(jobs)], (n // len(jobs)) % workers, n // slots + 1

    def request_of(n: int) -> paced_http.Request:
        job, w, batch = report(n)
        body = b'{"worker":"w%d","batch":%d}' % (w, batch)
        return ("POST", f"/jobs/{job}/progress?wait=1", {
            "Authorization": auth[job], "Content-Type": "application/json"}, body)

    def answered(n: int, status: int, data: bytes) -> bool:
        if status != 200:
            return False
        if json.loads(data).get("result") == "accepted":
            job, w, batch = report(n)
            key = (job, f"w{w}")
            acked[key] = max(acked.get(key, 0), batch)
        return True

    for rate, seconds in phases:
        p = paced_http.run(paced_http.run_paced("127.0.0.1", port, rate, seconds, request_of,
                                                answered, connections, late_s=LATE_S))
        log(f"controller load {rate:g}/s: send lag p99 {pct(p.send_lag_ms, 0.99)} ms, "
            f"{p.reconnects} reconnects")
        out.put(("controller", rate, p.records, p.unsent, seconds))
    out.put(("acked", [[j, w, b] for (j, w), b in acked.items()]))


def scheduler_load(port: int, phases, out: mp.Queue) -> None:
    phase = [0]   # names and idempotency keys must not repeat across phases: a repeated
    #               key is (rightly) answered as a replay, not a new submission

    def call(ctx, n):
        n = phase[0] * 10_000_000 + n
        text = f"jobs:\n  - {{name: soak-sub-{n:09d}, {SCHED_JOB}}}\n".encode()
        conn = _conn(ctx, port)
        conn.request("POST", "/submissions", body=text,
                     headers={"Content-Type": "application/yaml", "Content-Length": str(len(text)),
                              "Idempotency-Key": f"soak-{os.getpid()}-{n}"})
        resp = conn.getresponse()
        resp.read()
        if resp.getheader("Connection", "").lower() == "close":
            conn.close()
            ctx.clear()
        return resp.status == 201

    for k, (rate, seconds) in enumerate(phases):
        phase[0] = k
        p = Paced(rate, 16, call)
        p.run(seconds, time.monotonic())
        out.put(("scheduler", rate, p.records, p.unsent, seconds))


# ============================================================ main ===================
# The scheduler half is a steady state: SCHED_GPUS one-GPU jobs run at a time, each for
# SCHED_JOB_S seconds of the simulated executor, decided every SCHED_SLOT_S: a GPU is
# freed and refilled every 2 slots, so jobs finish at 50/s, the submission rate, and the
# queue stays near where it started (bench/results/scheduler-soak.md).
SCHED_TOPOLOGY = "leaf-spine:leaves=5,spines=2,hosts_per_leaf=5,gpus=2"    # 50 GPUs
SCHED_GPUS = 50
SCHED_SLOT_S = 0.5
SCHED_JOB_S = 0.9                 # < 2 slots: ends at the second slot after its start
SCHED_JOB = ("model: resnet18, dataset_size: 1000, epochs: 1, batch_size: 32, "
             "max_gpus: 1")


def scheduler_time_factor() -> float:
    """--time-factor that makes a SCHED_JOB last SCHED_JOB_S (C(1) of the estimator)."""
    from job_scheduler.core.estimator import Estimator
    from sluice_common.jobspec import parse_jobs_text

    (spec,) = parse_jobs_text(f"jobs:\n  - {{name: probe, {SCHED_JOB}}}\n", "probe")
    return SCHED_JOB_S / Estimator().C(spec, 1, 1000.0)


def start_scheduler(work: Path, queued: int) -> tuple[subprocess.Popen, int]:
    from job_scheduler.service.client import SchedulerClient, Unreachable

    port = free_port()
    log_file = open(work / "scheduler.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "sluice", "scheduler", "--listen",
                             f"127.0.0.1:{port}", "--db", str(work / "sched.db"), "--policy",
                             "fifo", "--topology", SCHED_TOPOLOGY, "--slot", str(SCHED_SLOT_S),
                             "--time-factor", f"{scheduler_time_factor():.6f}",
                             "--max-request-bytes", str(64 << 20)],
                            cwd=ROOT, stdout=log_file, stderr=log_file)
    client = SchedulerClient(f"http://127.0.0.1:{port}", timeout=600)
    deadline = time.monotonic() + 60
    while True:
        try:
            client.health()
            break
        except Unreachable:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("scheduler did not start")
            time.sleep(0.1)
    # the queue at the start: short jobs like the submitted ones, run in FIFO order
    chunk = 2000
    for start in range(0, queued, chunk):
        lines = [f"  - {{name: soak-q-{i:06d}, {SCHED_JOB}}}"
                 for i in range(start, min(queued, start + chunk))]
        client.submit("jobs:\n" + "\n".join(lines) + "\n", f"preload-{start}.yaml")
    return proc, port


def start_controller(work: Path, jobs: int, workers: int) -> tuple[mp.Process, int, dict]:
    port = free_port()
    state = str(work / "controller-state.json")
    proc = mp.Process(target=serve_controller, args=(port, state, jobs, workers), daemon=True)
    proc.start()
    tokens_file = Path(state + ".tokens")
    deadline = time.monotonic() + 120
    while not tokens_file.exists():
        if not proc.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("controller soak server did not start")
        time.sleep(0.1)
    time.sleep(0.2)
    return proc, port, json.loads(tokens_file.read_text())


@dataclass(frozen=True)
class SoakConfig:
    """The soak's options, built once from its command line."""
    minutes: float = 10.0
    rate: float = 2000.0                  # progress reports/s to the controller
    sub_rate: float = 50.0                # submissions/s to the scheduler
    jobs: int = 100
    workers: int = 8
    queued: int = 10000
    ramp_rates: tuple[float, ...] = (250, 500, 1000, 3000, 4000)
    ramp_sub_rates: tuple[float, ...] = (25, 100, 200, 400)
    out: str | None = None                # work directory (plot, logs, JSON)

    @property
    def seconds(self) -> float:
        return self.minutes * 60


def fresh_workdir(out: str | None) -> Path:
    work = Path(out or tempfile.mkdtemp(prefix="sluice-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("controller-state.json*"):   # a fresh controller and store
        old.unlink()
    for old in work.glob("sched.db*"):
        old.unlink()
    return work


def drive(cfg: SoakConfig, cproc, cport: int, tokens: dict, sproc, sport: int):
    """Both load generators to their end: per server its phases' records, each server's
    RSS samples over the soak, and the controller's acknowledged batches."""
    seconds = cfg.seconds
    q: mp.Queue = mp.Queue()
    ramp_c = [(r, 10.0) for r in cfg.ramp_rates]
    ramp_s = [(r, 10.0) for r in cfg.ramp_sub_rates]
    # the two ramps must not overlap (each would slow the other): the scheduler keeps
    # its base rate while the controller ramps, then ramps itself
    gens = [mp.Process(target=controller_load,
                       args=(cport, tokens, cfg.workers, [(cfg.rate, seconds)] + ramp_c, q)),
            mp.Process(target=scheduler_load,
                       args=(sport, [(cfg.sub_rate, seconds),
                                     (cfg.sub_rate, 10.0 * len(ramp_c))] + ramp_s, q))]
    t0 = time.monotonic()
    gens[0].start()
    gens[1].start()
    rss_c, rss_s = [], []
    results = {"controller": [], "scheduler": []}
    acked = None
    total = seconds + 10 * (len(ramp_c) + len(ramp_s))
    next_log = 60.0
    while any(g.is_alive() for g in gens) or not q.empty():
        t = time.monotonic() - t0
        if t < seconds:
            rss_c.append((t, rss_mb(cproc.pid)))
            rss_s.append((t, rss_mb(sproc.pid)))
        if t >= next_log and t < total:
            log(f"{t / 60:.0f} min: controller RSS {rss_c[-1][1]:.0f} MB, scheduler RSS "
                f"{rss_s[-1][1]:.0f} MB")
            next_log += 60
        try:
            item = q.get(timeout=1.0)
        except Exception:
            continue
        if item[0] == "acked":
            acked = item[1]
        else:
            results[item[0]].append((item[1], item[2], item[3], item[4]))
    for g in gens:
        g.join()
    return results, rss_c, rss_s, acked


def run(cfg: SoakConfig) -> dict:
    work = fresh_workdir(cfg.out)
    seconds = cfg.seconds
    warmup = min(120.0, seconds / 5)
    log(f"starting the controller ({cfg.jobs} jobs x {cfg.workers} workers on {TOPOLOGY})")
    cproc, cport, tokens = start_controller(work, cfg.jobs, cfg.workers)
    log(f"starting the scheduler and queueing {cfg.queued} jobs")
    t_pre = time.monotonic()
    sproc, sport = start_scheduler(work, cfg.queued)
    log(f"{cfg.queued} jobs queued in {time.monotonic() - t_pre:.1f} s; soak of "
        f"{cfg.minutes:g} min: {cfg.rate:g} reports/s, {cfg.sub_rate:g} submissions/s")
    results, rss_c, rss_s, acked = drive(cfg, cproc, cport, tokens, sproc, sport)
    # every acknowledged batch must be held by the controller
    from controller.client import ControllerClient
    held = {j["id"]: j["batches"] for j in ControllerClient(f"http://127.0.0.1:{cport}",
                                                            ADMIN).jobs()}
    missing = sum(1 for j, w, b in (acked or []) if held.get(j, {}).get(w, 0) < b)
    cproc.terminate()
    sproc.terminate()
    sproc.wait(timeout=30)
    (c_soak, *c_ramp), (s_soak, _gap, *s_ramp) = results["controller"], results["scheduler"]
    controller = {**side_summary(c_soak, c_ramp, seconds, rss_c, warmup, cfg.rate),
                  "jobs": cfg.jobs, "workers_per_job": cfg.workers,
                  "acked_batches_missing": missing}
    scheduler = {**side_summary(s_soak, s_ramp, seconds, rss_s, warmup, cfg.sub_rate),
                 "queued_at_start": cfg.queued}
    result = {
        "reports_per_s": controller["answered_per_s"], "p99_ms": controller["p99_ms"],
        "reports_lost": controller["errors"] + missing,
        "rss_growth_pct_after_warmup": controller["rss_growth_pct_after_warmup"],
        "submissions_lost": scheduler["errors"],
        "scheduler_p99_ms": scheduler["p99_ms"],
        "scheduler_rss_growth_pct_after_warmup": scheduler["rss_growth_pct_after_warmup"],
        "minutes": cfg.minutes, "warmup_s": warmup, "load_avg": os.getloadavg(),
        "controller": controller, "scheduler": scheduler}
    plot(result, work / "soak.png")
    (work / "soak.json").write_text(json.dumps(result, indent=1))
    log(f"plot and JSON in {work}")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=2000.0, help="progress reports/s")
    ap.add_argument("--sub-rate", type=float, default=50.0, help="submissions/s")
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--queued", type=int, default=10000)
    ap.add_argument("--ramp-rates", type=float, nargs="*", default=[250, 500, 1000, 3000, 4000])
    ap.add_argument("--ramp-sub-rates", type=float, nargs="*", default=[25, 100, 200, 400])
    ap.add_argument("--out", default=None, help="work directory (plot, logs, JSON)")
    args = ap.parse_args(argv)
    if args.minutes <= 0 or args.rate <= 0 or args.sub_rate <= 0:
        ap.error("--minutes, --rate and --sub-rate must be > 0")
    result = run(SoakConfig(minutes=args.minutes, rate=args.rate, sub_rate=args.sub_rate,
                            jobs=args.jobs, workers=args.workers, queued=args.queued,
                            ramp_rates=tuple(args.ramp_rates),
                            ramp_sub_rates=tuple(args.ramp_sub_rates), out=args.out))
    text = json.dumps({k: v for k, v in result.items()
                       if k not in ("controller", "scheduler")}, indent=1)
    print(text)
    for name in ("controller", "scheduler"):
        r = result[name]
        print(f"{name}: {r['answered_per_s']}/s answered of {r['offered_per_s']:g} offered, "
              f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, errors {r['errors']}, never sent "
              f"(fell behind) {r['unsent']}, RSS growth "
              f"after warm-up {r['rss_growth_pct_after_warmup']} %, falls behind at "
              f"{r['falls_behind_at_per_s']}/s")
    harness.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
