"""Scheduler service benchmark: acknowledged submissions per second, and kill -9 faults.

Everything runs against the real ``sluice scheduler`` process (loopback HTTP, SQLite in
WAL mode with synchronous=FULL, one fsync per acknowledged submission), in one run:

1. baseline: ``JobStore.add_submission`` in this process (the same durable commit, no
   HTTP, no service) — the ceiling the service is compared with;
2. load held: one-job submissions acknowledged per second through HTTP with 1 client and
   with 4 concurrent clients (each ack = the jobs are on disk);
3. faults survived: a stream of submissions from 4 clients while the service is
   ``kill -9``-ed and restarted ``--kills`` times; every client retries with its
   idempotency key until acknowledged. Then: acknowledged submissions missing (must be 0),
   duplicated (must be 0), restart-to-healthy time, and whether every simulated job that
   was running across the kills finished (reconciled, none forgotten).

    .venv/bin/python -m bench.api.bench_scheduler_service [--n 300] [--kills 5] [--json]

Progress goes to stderr; one line per figure on stdout.
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from sluice_common.jobspec import parse_jobs_text
from job_scheduler.service.client import SchedulerClient, Unreachable
from job_scheduler.service.store import JobStore
from ps_runtime.ports import free_port

ROOT = Path(__file__).resolve().parents[2]   # imported by file (mininet_tests.experiment_faults)
PY = str(ROOT / ".venv" / "bin" / "python")


def log(text: str) -> None:
    print(f"bench_scheduler_service: {text}", file=sys.stderr, flush=True)


def job_file(name: str) -> str:
    return (f"jobs:\n  - {{name: {name}, model: resnet18, dataset_size: 1000, epochs: 1, "
            f"batch_size: 32, max_gpus: 2}}\n")



class Service:
    def __init__(self, workdir: Path, *extra: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [PY, "-m", "sluice", "scheduler", "--listen", f"127.0.0.1:{self.port}",
                     "--db", str(workdir / "sched.db"), *extra]
        self.log = open(workdir / "service.log", "ab")
        self.proc: subprocess.Popen | None = None

    def start(self) -> float:
        """Start and wait until /health answers; returns seconds to healthy."""
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, stdout=self.log, stderr=self.log)
        client = SchedulerClient(self.url, timeout=2)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited with {self.proc.returncode}")
            try:
                client.health()
                return time.monotonic() - t0
            except Unreachable:
                time.sleep(0.02)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def baseline_store(n: int, workdir: Path) -> float:
    store = JobStore(workdir / "baseline.db")
    specs = [parse_jobs_text(job_file(f"b{i}"), "b") for i in range(n)]
    t0 = time.perf_counter()
    for i, s in enumerate(specs):
        store.add_submission("b.yaml", job_file(f"b{i}"), s, idempotency_key=f"base-{i:06d}")
    elapsed = time.perf_counter() - t0
    store.close()
    return n / elapsed


def http_rate(url: str, n: int, clients: int, prefix: str) -> float:
    per = n // clients
    errors: list[BaseException] = []

    def run(c: int):
        client = SchedulerClient(url, timeout=10)
        try:
            for i in range(per):
                client.submit(job_file(f"{prefix}{c}-{i}"), "bench.yaml")
        except BaseException as err:       # reported below, not swallowed
            errors.append(err)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return per * clients / elapsed


def slot_cost(topology: str, n: int, workdir: Path) -> dict:
    """In-process: queue n jobs in one file, then time scheduling slots (lyapunov)."""
    from job_scheduler.core.estimator import Estimator
    from job_scheduler.service.executors import SimulatedExecutor
    from job_scheduler.service.scheduler import SchedulerService
    from job_scheduler.service.executors import estimated_duration
    from job_scheduler.service.policy_step import make_policy_step
    from topologies import load_topology

    topo, est = load_topology(topology), Estimator()
    store = JobStore(workdir / f"slots-{topology}.db")
    svc = SchedulerService(store, topo, make_policy_step("lyapunov", topo, est),
                           {"simulated": SimulatedExecutor(estimated_duration(topo, est), 1e3)},
                           "simulated")
    body = "jobs:\n" + "".join(
        f"  - {{name: q{i}, model: resnet18, dataset_size: 50000, epochs: 2, batch_size: 32, "
        f"max_gpus: {1 + i % 8}}}\n" for i in range(n))
    t0 = time.perf_counter()
    svc.submit(body, "many.yaml")
    submit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    first = svc.tick()
    first_s = time.perf_counter() - t0
    later = []
    for _ in range(3):
        t0 = time.perf_counter()
        svc.tick()
        later.append(time.perf_counter() - t0)
    store.close()
    return {"topology": topology, "queued": n, "submit_file_s": submit_s,
            "first_slot_s": first_s, "first_slot_started": first["started"],
            "later_slot_s": statistics.median(later)}


def fault_run(workdir: Path, n: int, kills: int, clients: int = 4) -> dict:
    # Simulated jobs last ~0.3-1 s, so some are always running when the kill comes.
    svc = Service(workdir, "--slot", "0.05", "--policy", "fifo", "--time-factor", "0.5")
    svc.start()
    acked: dict[str, list[int]] = {}
    dup_acks = 0
    lock = threading.Lock()
    per = n // clients

    def run(c: int):
        nonlocal dup_acks
        client = SchedulerClient(svc.url, timeout=10)
        for i in range(per):
            name = f"f{c}-{i:04d}"
            answer = client.submit(job_file(name), f"{name}.yaml", retry_seconds=60)
            with lock:
                acked[name] = answer["jobs"]
                dup_acks += answer["duplicate"]

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    restarts, running_at_kill = [], []
    for k in range(kills):
        target = (k + 1) * per * clients // (kills + 1)
        while len(acked) < target:
            time.sleep(0.002)
        try:
            running_at_kill.append(len(SchedulerClient(svc.url, timeout=2).jobs("running")))
        except Unreachable:
            running_at_kill.append(-1)
        svc.kill9()
        restarts.append(svc.start())
        log(f"kill -9 #{k + 1} at {len(acked)} acks; healthy again after "
            f"{restarts[-1]:.2f} s")
    for t in threads:
        t.join()
    client = SchedulerClient(svc.url)
    deadline = time.monotonic() + 60
    while any(j["state"] != "finished" for j in client.jobs()) and time.monotonic() < deadline:
        time.sleep(0.2)
    jobs = client.jobs()
    by_name: dict[str, list[int]] = {}
    for j in jobs:
        by_name.setdefault(j["name"], []).append(j["id"])
    svc.stop()
    return {
        "submissions": len(acked),
        "kills": kills,
        "lost": sum(1 for name in acked if name not in by_name),
        "duplicated": sum(len(ids) - 1 for ids in by_name.values()),
        "acked_ids_match": all(by_name.get(name) == ids for name, ids in acked.items()),
        "acked_via_retry": dup_acks,
        "running_at_kill": running_at_kill,
        "states": {s: sum(j["state"] == s for j in jobs)
                   for s in ("queued", "running", "finished", "failed", "cancelled")},
        "restart_to_healthy_s": restarts,
    }


def main() -> int:
    from bench import harness   # here: experiment_faults imports this file by path

    ap = harness.parser(__doc__)
    ap.add_argument("--n", type=int, default=300, help="submissions per rate measurement")
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--fault-n", type=int, default=400, help="submissions in the fault run")
    ap.add_argument("--queued", type=int, default=2000, help="queued jobs for the slot cost")
    args = ap.parse_args()
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="sluice-bench-svc-") as tmp:
        work = Path(tmp)
        log(f"baseline: {args.n} durable commits in-process")
        out["store_commits_per_s"] = baseline_store(args.n, work)
        svc_dir = work / "rate"
        svc_dir.mkdir()
        # slot 1 s, simulated jobs: scheduling runs but does not dominate the rate
        svc = Service(svc_dir, "--slot", "1.0", "--time-factor", "0.01")
        try:
            svc.start()
            for clients in (1, 4):
                log(f"HTTP: {args.n} submissions, {clients} client(s)")
                out[f"http_acks_per_s_{clients}_clients"] = http_rate(svc.url, args.n, clients,
                                                                      f"c{clients}-")
        finally:
            svc.stop()
        fault_dir = work / "faults"
        fault_dir.mkdir()
        log(f"fault run: {args.fault_n} submissions from 4 clients, {args.kills} x kill -9")
        out["faults"] = fault_run(fault_dir, args.fault_n, args.kills)
        out["slots"] = []
        for topology in ("two-rack", "cluster-2k"):
            log(f"slot cost: {args.queued} queued jobs on {topology}")
            out["slots"].append(slot_cost(topology, args.queued, work))

    f = out["faults"]
    if args.json:
        harness.write_json(args.json, out)
        return 0
    base = out["store_commits_per_s"]
    print(f"durable commits/s, JobStore in-process (baseline):   {base:8.1f}")
    for c in (1, 4):
        r = out[f"http_acks_per_s_{c}_clients"]
        print(f"acknowledged submissions/s via HTTP, {c} client(s):   {r:8.1f}  "
              f"({r / base:.2f}x baseline)")
    print(f"kill -9 survived: {f['kills']} during {f['submissions']} submissions "
          f"(4 clients); running jobs at each kill: {f['running_at_kill']}")
    print(f"acknowledged but lost: {f['lost']}; duplicated: {f['duplicated']}; "
          f"ids as acknowledged: {f['acked_ids_match']}; acknowledged on retry: "
          f"{f['acked_via_retry']}")
    print(f"final states: {f['states']}")
    rs = f["restart_to_healthy_s"]
    print(f"restart to healthy: median {statistics.median(rs):.2f} s, max {max(rs):.2f} s")
    for sl in out["slots"]:
        print(f"slot cost, {sl['queued']} queued on {sl['topology']}: one {sl['queued']}-job "
              f"file accepted in {sl['submit_file_s']:.2f} s; first slot {sl['first_slot_s']:.2f} s "
              f"({sl['first_slot_started']} jobs started), later slots {sl['later_slot_s']:.3f} s")
    ok = f["lost"] == 0 and f["duplicated"] == 0 and f["acked_ids_match"] \
        and f["states"]["finished"] == f["submissions"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
