"""What one progress report costs the controller's service: incremental vs full re-rank.

    .venv/bin/python -m bench.controller.bench_report_cost [--jobs 100] [--workers 8] [--reports 3000]

The soak's controller (``--jobs`` jobs of ``--workers`` workers on leaf-spine, every
switch connected to an in-memory flow table, no HTTP) takes ``--reports`` progress
reports, each worker advancing batch by batch, one report at a time, under each ranking
rule, twice: with the incremental path (the rule's ranker re-ranks only what the report
moved, only those flows' rules are rebuilt and sent) and with the full recompute it
replaced (every flow re-ranked and diffed per report; the baseline, same run). Jobs
carry near-equal sizes, so under ``remaining`` the jobs keep overtaking each other.
Prints ms per report and the speed-up per rule (and JSON with --json).
"""

from __future__ import annotations

import collections
import os
import time

from controller.auth import Northbound
from controller.fake_fabric import bring_up
from controller.service import ControllerService
from controller.sinks import TableSink
from controller.config import ControllerConfig
from topologies import load_topology

from bench import harness
from sluice_common import rank_rules
from sluice_common.rank_rules import DEFAULT_RULE

ADMIN = "bench-admin-token"


def service(rank: str, jobs: int, workers: int, full: bool):
    topo = load_topology("leaf-spine")
    svc = ControllerService(ControllerConfig(topology=topo, admin_token=ADMIN, rank=rank,
                                             rate_per_s=1e9), sink=TableSink())
    svc.sink.sent = collections.deque(maxlen=0)
    bring_up(svc)
    if full:       # the path before incremental re-ranking: every report reconciles all
        svc.reconciler.moved = lambda moved, on_done: None
    ips = [h.ip for h in topo.hosts]
    guard = Northbound(svc)     # reports pass the token and rate checks, as over HTTP
    tokens = {}
    for j in range(jobs):
        # near-equal sizes: as the jobs advance in turn they overtake each other, so
        # ``remaining`` keeps moving jobs in and out of the levels of their own
        body = {"id": f"j{j:03d}", "total_batches": 50 * workers + j % 5,
                "bytes_per_batch": 1 << 20,
                "servers": [{"id": "s0", "ip": ips[j % len(ips)], "port": 20000 + j}],
                "workers": [{"id": f"w{w}", "ip": ips[(j + 1 + w) % len(ips)],
                             "port": 30000 + j * workers + w} for w in range(workers)]}
        tokens[body["id"]] = guard.register_job(ADMIN, body)["token"]
    return guard, tokens


def ms_per_report(guard, tokens, workers: int, reports: int) -> tuple[float, int]:
    names = sorted(tokens)
    mods = 0
    t0 = time.perf_counter()
    for n in range(reports):
        job = names[n % len(names)]
        w = (n // len(names)) % workers
        answer, _ = guard.progress(job, tokens[job], {"worker": f"w{w}",
                                                      "batch": n // (len(names) * workers) + 1})
        mods += answer["changed_rules"]
    return 1000 * (time.perf_counter() - t0) / reports, mods


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--reports", type=int, default=3000)
    args = ap.parse_args(argv)
    out = {"jobs": args.jobs, "workers": args.workers, "reports": args.reports,
           "load_avg": os.getloadavg()[0], "rules": {}}
    # the default rule first, then the others in registration order
    for rank in (DEFAULT_RULE, *(r for r in rank_rules.names() if r != DEFAULT_RULE)):
        row = {}
        for label, full in (("full", True), ("incremental", False)):
            svc, tokens = service(rank, args.jobs, args.workers, full)
            row[f"{label}_ms"], row[f"{label}_flow_mods"] = ms_per_report(
                svc, tokens, args.workers, args.reports)
        row["speedup"] = row["full_ms"] / row["incremental_ms"]
        out["rules"][rank] = row
        print(f"{rank}: full {row['full_ms']:.3f} ms/report, incremental "
              f"{row['incremental_ms']:.3f} ms/report ({row['speedup']:.0f}x); flow mods "
              f"sent {row['full_flow_mods']} / {row['incremental_flow_mods']}", flush=True)
        harness.figure(f"{rank} incremental cost per report", row["incremental_ms"], "ms",
                       baseline=row["full_ms"], note="(baseline: full re-rank)")
    print(f"load average {out['load_avg']:.1f}")
    harness.write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
