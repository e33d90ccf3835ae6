"""What moving a job's flows costs the controller's service (migration).

    .venv/bin/python -m bench.controller.bench_rule_swap [--jobs 100] [--workers 8] [--repeats 50]

The soak's controller (``--jobs`` jobs of ``--workers`` workers on leaf-spine, every
switch connected to an in-memory flow table, no HTTP, no switch round trip) sees one
job migrate, as ``sluice run --migrate`` and time-slicing do it: the job is removed (one
reconcile: its old rules deleted) and registered again on other hosts (one reconcile:
the new rules installed). Timed: the removal, the registration, and both; the baseline
(same run) is registering and removing a job that was not there before. Checked on
every repeat: afterwards the job holds exactly its new placement's rules.
"""

from __future__ import annotations

import collections
import os
import statistics
import sys
import time

from controller.auth import Northbound
from controller.fake_fabric import bring_up
from controller.service import ControllerService
from controller.sinks import TableSink
from controller.config import ControllerConfig
from topologies import load_topology

from bench import harness

ADMIN = "bench-admin-token"


def job(name: str, ips: list[str], first: int, workers: int, port: int) -> dict:
    return {"id": name, "servers": [{"id": "s0", "ip": ips[first % len(ips)], "port": port}],
            "workers": [{"id": f"w{w}", "ip": ips[(first + 1 + w) % len(ips)],
                         "port": port + 1 + w} for w in range(workers)]}


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args(argv)
    topo = load_topology("leaf-spine")
    svc = ControllerService(ControllerConfig(topology=topo, admin_token=ADMIN, rank="progress",
                                             rate_per_s=1e9), sink=TableSink())
    svc.sink.sent = collections.deque(maxlen=0)
    bring_up(svc)
    guard = Northbound(svc)
    ips = [h.ip for h in topo.hosts]
    for j in range(args.jobs):
        guard.register_job(ADMIN, job(f"j{j:03d}", ips, j, args.workers, 20000 + 20 * j))
    half = len(ips) // 2
    where = [job("moved", ips, 0, args.workers, 50000), job("moved", ips, half, args.workers, 50000)]
    guard.register_job(ADMIN, where[0])
    times = {"remove_ms": [], "register_ms": [], "move_ms": [], "baseline_ms": []}
    for k in range(args.repeats):
        t0 = time.perf_counter()
        guard.remove_job(ADMIN, "moved")
        t1 = time.perf_counter()
        guard.register_job(ADMIN, where[(k + 1) % 2])
        t2 = time.perf_counter()
        cookie = svc.registry.jobs["moved"].cookie
        ips_now = {v for r in svc.sink.table.with_cookie(cookie) for f, v in r.match
                   if f in ("ipv4_src", "ipv4_dst")}
        body = where[(k + 1) % 2]
        want = {e["ip"] for e in body["servers"] + body["workers"]}
        if not ips_now or not ips_now <= want:
            raise SystemExit(f"repeat {k}: the moved job's rules name {sorted(ips_now)}, "
                             f"not only its new hosts {sorted(want)}")
        t3 = time.perf_counter()
        guard.register_job(ADMIN, job("fresh", ips, k, args.workers, 60000))
        guard.remove_job(ADMIN, "fresh")
        t4 = time.perf_counter()
        for key, v in (("remove_ms", t1 - t0), ("register_ms", t2 - t1),
                       ("move_ms", t2 - t0), ("baseline_ms", t4 - t3)):
            times[key].append(1000 * v)
    out = {"jobs": args.jobs, "workers": args.workers, "repeats": args.repeats,
           "load_avg": round(os.getloadavg()[0], 2),
           **{k: round(statistics.median(v), 3) for k, v in times.items()}}
    out["move_vs_baseline"] = round(out["move_ms"] / out["baseline_ms"], 3)
    harness.figure("migration rule swap (remove + register)", out["move_ms"], "ms",
                   baseline=out["baseline_ms"], note="(baseline: a fresh job's register + remove)")
    if args.json:
        harness.write_json(args.json, out)
    else:
        print(f"{args.jobs} jobs x {args.workers} workers on leaf-spine, median of "
              f"{args.repeats}, load {out['load_avg']}: remove {out['remove_ms']:.2f} ms + "
              f"register {out['register_ms']:.2f} ms = move {out['move_ms']:.2f} ms "
              f"({out['move_vs_baseline']:.2f}x a fresh job's register + remove, "
              f"{out['baseline_ms']:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
