"""Twenty hostile clients against both services while a valid client works.

Starts ``sluice scheduler`` and ``sluice controller`` (no switch connected) as processes
with admin tokens on free loopback ports. A valid client (bench/api/valid_client.py)
submits one-job files to the scheduler and reports progress to the controller, first
alone (the idle baseline), then while ``--clients`` hostile clients
(bench/api/hostile_load.py, a process of their own) send hostile bodies
(bench/api/hostile_bodies.py: nesting 50,000 deep, YAML aliases, huge numbers, 1 MB
bodies, binary, wrong content types) to every endpoint that takes a body, as fast as
they are answered, for ``--minutes``. A service that exits is counted as a crash and
started again on its state (so that the rest can still be measured; this benchmark's
restart is no supervisor: deploy/systemd/ is).

Prints the hostile answers per kind (statuses, largest answer, longest time), the valid
client's latency p50/p99 idle and under the storm, each service's resident memory
(VmRSS) before and after the storm, the valid jobs/reports acknowledged and lost, and a
verdict per bound (bench/api/verdicts.py), computed here: p99 <= 250 ms, RSS after
<= 1.2x before, 0 crashes, 0 acknowledged items lost, every hostile answer a 4xx of
<= 64 KB within 3 s.

    .venv/bin/python -m bench.api.bench_hostile [--minutes 5] [--quick] [--clients 20]
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from dataclasses import dataclass
from pathlib import Path

from controller.client import ControllerClient
from ps_runtime.ports import free_port

from bench import harness
from bench.api.api_defects_curl import start
from bench.harness import ROOT
from bench.api.bench_api_burst import memory_kb
from bench.api.hostile_load import run_storm
from bench.api.valid_client import ValidClient, percentile
from bench.api.verdicts import answer_summary, verdicts

SCHED_TOKEN = "hostile-bench-scheduler-token"
CTL_TOKEN = "hostile-bench-controller-token"
HOSTILE_JOB = {"id": "hostile-job", "servers": [{"id": "s0", "ip": "10.0.0.4", "port": 9100}],
               "workers": [{"id": "w0", "ip": "10.0.0.3", "port": 9101}]}


class Service:
    """One service process, started again on the same state when it has exited."""

    def __init__(self, name: str, tree: Path, args: list[str], env: dict, port: int,
                 log: Path):
        self.name, self.tree, self.args, self.env, self.port, self.log = \
            name, tree, args, env, port, log
        self.crashes: list[int] = []         # exit statuses seen
        self.proc = self._start()

    def _start(self) -> subprocess.Popen:
        # a process group of its own: the check processes it starts end with it
        return start(self.tree, self.args, self.env, self.port, self.log, new_session=True)

    def check(self) -> None:
        code = self.proc.poll()
        if code is not None:
            self.crashes.append(code)
            print(f"!! {self.name} exited with {code}: started again", flush=True)
            self._kill_group(signal.SIGKILL)
            self.proc = self._start()

    def _kill_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._kill_group(signal.SIGKILL)         # children it left behind


def start_services(tree: Path, work: Path) -> dict[str, Service]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLUICE_SCHEDULER_TOKEN", "SLUICE_ADMIN_TOKEN", "PYTHONPATH")}
    sp, cp = free_port(), free_port()
    return {
        "scheduler": Service("scheduler", tree, [
            "scheduler", "--listen", f"127.0.0.1:{sp}", "--db", str(work / "jobs.db")],
            {**env, "SLUICE_SCHEDULER_TOKEN": SCHED_TOKEN}, sp, work / "scheduler.log"),
        "controller": Service("controller", tree, [
            "controller", "--api", f"127.0.0.1:{cp}", "--ofp-port", str(free_port()),
            "--state-file", str(work / "ctl.json")],
            {**env, "SLUICE_ADMIN_TOKEN": CTL_TOKEN}, cp, work / "controller.log"),
    }


def latency_figures(client: ValidClient, lo: int, hi: int, failed: tuple[int, int],
                    phase: str) -> dict:
    """p50/p99 of the valid requests in [lo, hi) (answered ones, plus the time each failed
    request took: a timeout counts at its full length), overall and per service."""
    t = client.tally
    lat = t.latencies_ms[lo:hi] + t.failed_ms[failed[0]:failed[1]]
    out = {"requests": hi - lo, "failed": failed[1] - failed[0],
           "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99)}
    for name, want in (("scheduler", True), ("controller", False)):
        part = [x for x, s in zip(t.latencies_ms[lo:hi], t.to_scheduler[lo:hi]) if s == want]
        out[f"{name}_p99_ms"] = percentile(part, 0.99)
    print(f"valid client, {phase}: {out['requests']} answered, {out['failed']} failed; "
          f"p50 {out['p50_ms']:.1f} ms, p99 {out['p99_ms']:.1f} ms (scheduler p99 "
          f"{out['scheduler_p99_ms']:.1f}, controller p99 {out['controller_p99_ms']:.1f})",
          flush=True)
    return out


def run_storm_beside(services: dict[str, Service], job_token: str, seconds: float,
                     clients: int) -> dict:
    """The storm in a process of its own; meanwhile a dead service is counted and
    started again."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        future = pool.submit(run_storm, services["scheduler"].port, SCHED_TOKEN,
                             services["controller"].port, CTL_TOKEN, HOSTILE_JOB["id"],
                             job_token, seconds, clients)
        while not future.done():
            time.sleep(0.5)
            for service in services.values():
                service.check()
        return future.result()


def print_kinds(stats: dict[str, dict]) -> None:
    print(f"\n{'hostile request':<36} {'sent':>6} {'statuses':<26} {'no answer':>9} "
          f"{'max B':>7} {'max ms':>8}")
    for name, s in stats.items():
        codes = ",".join(f"{c}x{n}" for c, n in sorted(s["statuses"].items()))
        print(f"{name:<36} {s['count']:>6} {codes:<26} {s['no_answer']:>9} "
              f"{s['max_bytes']:>7} {s['max_ms']:>8.0f}")


def rss_mib(services: dict[str, Service]) -> dict[str, float]:
    return {n: memory_kb(s.proc.pid)["VmRSS"] / 1024 for n, s in services.items()}


@dataclass(frozen=True)
class StormConfig:
    """The run's timing and load, built once from its command line."""
    minutes: float = 5.0          # storm length
    clients: int = 20             # hostile clients
    idle_s: float = 30.0          # idle baseline before the storm
    period: float = 0.1           # seconds between the valid client's rounds
    settle_s: float = 5.0         # wait after the storm before the RSS is read


def measure(cfg: StormConfig, services: dict[str, Service]) -> dict:
    """The run: idle baseline, the storm, the figures (the caller prints verdicts)."""
    sched, ctl = services["scheduler"], services["controller"]
    job_token = ControllerClient(f"http://127.0.0.1:{ctl.port}", CTL_TOKEN).register_job(
        HOSTILE_JOB)["token"]
    client = ValidClient(f"http://127.0.0.1:{sched.port}", SCHED_TOKEN,
                         f"http://127.0.0.1:{ctl.port}", CTL_TOKEN, period_s=cfg.period)
    client.register()
    client.start()
    time.sleep(2)                                       # warm-up, not measured
    i0, f0 = len(client.tally.latencies_ms), len(client.tally.failed_ms)
    time.sleep(cfg.idle_s)
    i1, f1 = len(client.tally.latencies_ms), len(client.tally.failed_ms)
    idle = latency_figures(client, i0, i1, (f0, f1), "idle")
    before = rss_mib(services)
    print(f"RSS before the storm: {before}; load average {os.getloadavg()}", flush=True)
    stats = run_storm_beside(services, job_token, cfg.minutes * 60, cfg.clients)
    i2, f2 = len(client.tally.latencies_ms), len(client.tally.failed_ms)
    client.stop()
    storm = latency_figures(client, i1, i2, (f1, f2), "under the storm")
    for service in services.values():
        service.check()
    time.sleep(cfg.settle_s)
    after = rss_mib(services)
    lost = client.lost()
    print_kinds(stats)
    return {"idle": idle, "storm": storm, "rss_before_mib": before, "rss_after_mib": after,
            "crashes": {n: s.crashes for n, s in services.items()},
            "accepted_jobs": len(client.tally.accepted_jobs),
            "acked_batches": client.tally.acked_batch, "lost": lost,
            "valid_failures": client.tally.failures,
            "answers": answer_summary(stats), "kinds": stats}


def report(fig: dict) -> list[dict]:
    print()
    harness.figure("valid p50, storm", fig["storm"]["p50_ms"], "ms",
                   baseline=fig["idle"]["p50_ms"])
    harness.figure("valid p99, storm", fig["storm"]["p99_ms"], "ms",
                   baseline=fig["idle"]["p99_ms"])
    for name in fig["rss_before_mib"]:
        harness.figure(f"{name} RSS after the storm", fig["rss_after_mib"][name], "MiB",
                       baseline=fig["rss_before_mib"][name])
    a = fig["answers"]
    print(f"hostile requests: {a['count']} sent, statuses {a['statuses']}, not 4xx "
          f"{a['not_4xx']}, no answer {a['no_answer']}, largest answer {a['max_bytes']} B, "
          f"longest {a['max_ms']:.0f} ms")
    print(f"valid client: {fig['accepted_jobs']} jobs accepted, batches acked "
          f"{fig['acked_batches']}, failures {fig['valid_failures']}; lost {fig['lost']}; "
          f"crashes {fig['crashes']}")
    out = verdicts(fig)
    for v in out:
        print(f"VERDICT {v['bound']}: {v['value']} -> {'met' if v['met'] else 'NOT MET'}")
    return out


def main() -> int:
    parser = harness.parser(__doc__, quick="20 s of storm after 5 s idle (unless --minutes "
                            "or --idle-s say otherwise)")
    parser.add_argument("--minutes", type=float, default=None, help="storm length (default 5)")
    parser.add_argument("--clients", type=int, default=20, help="hostile clients (default 20)")
    parser.add_argument("--idle-s", type=float, default=None, help="idle baseline (default 30)")
    parser.add_argument("--period", type=float, default=0.1,
                        help="seconds between the valid client's rounds (default 0.1)")
    parser.add_argument("--settle-s", type=float, default=5.0,
                        help="wait after the storm before the RSS is read (default 5)")
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="source tree whose services to start (PYTHONPATH=TREE)")
    args = parser.parse_args()
    if args.minutes is None:
        args.minutes = 20 / 60 if args.quick else 5.0
    if args.idle_s is None:
        args.idle_s = 5.0 if args.quick else 30.0
    work = Path(tempfile.mkdtemp(prefix="sluice-hostile-"))
    print(f"tree {args.tree.resolve()}; {args.clients} hostile clients for "
          f"{args.minutes * 60:.0f} s; load average {os.getloadavg()}", flush=True)
    services = start_services(args.tree.resolve(), work)
    try:
        fig = measure(StormConfig(minutes=args.minutes, clients=args.clients,
                                  idle_s=args.idle_s, period=args.period,
                                  settle_s=args.settle_s), services)
        fig["verdicts"] = report(fig)
    finally:
        for service in services.values():
            service.stop()
        shutil.rmtree(work, ignore_errors=True)
    harness.write_json(args.json, fig)
    return 0 if all(v["met"] for v in fig["verdicts"]) else 1


if __name__ == "__main__":
    sys.exit(main())
