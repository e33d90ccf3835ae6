"""The SDN half at cluster scale: one controller process, N emulated workers, S switches.

    .venv/bin/python -m bench.controller.bench_scale --workers 2048 [--per-job 8]
        [--seconds 60] [--warmup 15] [--rank remaining] [--hints on|off] [--json OUT]
        [--pod-workers 2048: a controller per pod, bench/controller/bench_pods.py]

- the controller: `sluice controller` as its own process (os-ken over TCP, the REST API),
  started from a state file that holds the fabric and the running jobs (as after a
  restart: a cluster of this size is not brought up from nothing in a benchmark);
- the fabric: a leaf-spine of S switches for the N workers (8 GPUs a host, 16 hosts a
  rack), each switch a fake OpenFlow 1.3 switch over TCP in a process of its own
  (bench/controller/fake_openflow.py: flow table, barrier replies, LLDP, ARP);
- the load: N / per-job jobs, steps 30-300 ms, 1-10 minutes long, replaced by a new
  arrival when done; every worker reports through the real client logic
  (ps_runtime.progress.ReportGate) following the controller's answers, ``?wait=1``.

Measured from the end of the warm-up: reports arriving per second (and what today's
client would send: every worker every max(step, 0.2 s)), the controller process's CPU
(from /proc, a fraction of one core), level change -> barrier reply (the controller's
own figure in each answer that changed rules; the client's round trip beside it), flow
mods per second and rules per switch (counted by the switches), reports lost (not
answered 200, or acknowledged and not held by the controller at the end). The verdicts
are the controller's bounds at cluster scale: CPU < 25 % of a core, level change p99
< 50 ms, 0 lost, rules per edge switch against 2,000 entries.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import harness
from sluice_common import rank_rules
from bench.controller import scale_cluster as C
from bench.controller.scale_run import (ScaleConfig, Switches, drive, held_batches, log, pct,
                                        start_controller, today_rate)

CPU_BOUND, P99_BOUND_MS, EDGE_TABLE = 0.25, 50.0, 2000


def run(cfg: ScaleConfig) -> dict:
    topo = C.topology_dict(cfg.workers)
    topo_obj = C.load(topo)
    jobs = C.initial_jobs(topo_obj, cfg.workers, cfg.per_job, cfg.seed)
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-scale-"))
    t_start = time.monotonic()
    proc, ofp, api = start_controller(work, topo, jobs, cfg)
    switches = None
    try:
        log(f"controller up with {len(jobs)} jobs in {time.monotonic() - t_start:.1f} s; "
            f"{len(topo_obj.switches)} switches connecting")
        switches = Switches(topo, ofp)
        settled = switches.settle(len(topo_obj.switches), 600)
        log(f"switches hold their rules ({settled['rules_total']} in all) after "
            f"{time.monotonic() - t_start:.1f} s; load for {cfg.warmup + cfg.seconds:.0f} s")
        load_avg0 = os.getloadavg()
        out = asyncio.run(drive(topo_obj, jobs, api, cfg, proc.pid, switches))
        held = held_batches(api)
    finally:
        if switches is not None:
            switches.stop()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:     # still saving a large state: no need to
            proc.kill()
            proc.wait(5)
    fig, window = out["fig"], out["window_s"]
    missing = sum(1 for k, b in fig.acked.items() if k in held and held[k] < b)
    sw0, sw1 = out["sw0"], out["sw1"]
    return {
        "workers": cfg.workers, "jobs": len(jobs), "per_job": cfg.per_job,
        "switches": len(topo_obj.switches), "hosts": len(topo_obj.hosts), "rank": cfg.rank,
        "hints": cfg.hints, "seconds": round(window, 1),
        "reports_per_s": round(fig.reports / window, 1),
        "reports_per_s_today_client": round(today_rate(jobs), 1),
        "controller_cpu_share": round(out["cpu"], 4),
        "load_generator_cpu_share": round(out["load_cpu"], 4),
        "switches_cpu_share": round((sw1["cpu_s"] - sw0["cpu_s"]) / window, 4),
        "level_changes": len(fig.level_changes_ms),
        "level_change_p50_ms": pct(fig.level_changes_ms, 0.5),
        "level_change_p99_ms": pct(fig.level_changes_ms, 0.99),
        "level_change_rtt_p99_ms": pct(fig.level_changes_rtt_ms, 0.99),
        "level_changes_not_applied": fig.not_applied,
        "lost": fig.lost + missing + fig.not_applied, "acked_not_held": missing,
        "arrivals": fig.arrivals, "removals": fig.removals, "admin_errors": fig.admin_errors[:5],
        "admin_p50_ms": pct(fig.admin_ms, 0.5), "admin_max_ms": pct(fig.admin_ms, 1.0),
        "flow_mods_per_s": round((sw1["flow_mods"] - sw0["flow_mods"]) / window, 1),
        "switch_reconnects": sw1["reconnects"] - sw0["reconnects"],
        "rules_total": sw1["rules_total"],
        "rules_per_edge_switch_max": sw1["rules_per_edge_switch_max"],
        "job_rules_per_edge_switch_max": sw1["job_rules_per_edge_switch_max"],
        "rules_per_switch_max": sw1["rules_per_switch_max"],
        "setup_s": round(time.monotonic() - t_start - window - cfg.warmup, 1),
        "load_avg_before": load_avg0, "load_avg_after": os.getloadavg()}


def rules_only(cfg: ScaleConfig) -> dict:
    """The rules the controller wants on each switch for this cluster, computed by its
    own service in this process (one full reconcile with every switch connected, on an
    in-memory table): the figure for sizes whose fabric one controller does not bring up
    in the bench's time."""
    import collections

    from controller.service import ControllerService
    from controller.sinks import TableSink
    from controller.config import ControllerConfig

    topo = C.topology_dict(cfg.workers)
    topo_obj = C.load(topo)
    jobs = C.initial_jobs(topo_obj, cfg.workers, cfg.per_job, cfg.seed)
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-scale-rules-"))
    (work / "state.json").write_text(json.dumps(C.state_file(topo_obj, jobs, cfg.rank, 0.0)))
    t0 = time.process_time()
    svc = ControllerService(ControllerConfig(topology=topo_obj, state_file=work / "state.json",
                                             rank=cfg.rank), sink=TableSink())
    svc.sink.sent = collections.deque(maxlen=0)
    with svc.lock:
        svc.shared.fabric.connected.update(s.dpid for s in topo_obj.switches)
        svc.reconciler.fabric_dirty = True
        svc.reconciler.full()
    cpu = time.process_time() - t0
    tor = {s.dpid for s in topo_obj.switches if s.role == "tor"}
    per, jobs_per = collections.Counter(), collections.Counter()
    for r in svc.installed.rules.values():
        per[r.dpid] += 1
        jobs_per[r.dpid] += r.cookie >> 56 == 0x51
    return {"workers": cfg.workers, "jobs": len(jobs), "switches": len(topo_obj.switches),
            "hosts": len(topo_obj.hosts), "rules_only": True,
            "rules_total": sum(per.values()),
            "rules_per_edge_switch_max": max(per[d] for d in tor),
            "job_rules_per_edge_switch_max": max(jobs_per[d] for d in tor),
            "rules_per_switch_max": max(per.values()),
            "full_reconcile_cpu_s": round(cpu, 2)}


def verdicts(r: dict) -> dict:
    lat = r["level_change_p99_ms"]
    return {"cpu_under_25pct": r["controller_cpu_share"] < CPU_BOUND,
            "level_change_p99_under_50ms": lat is not None and lat < P99_BOUND_MS,
            "zero_lost": r["lost"] == 0,
            "edge_rules_within_2000": r["rules_per_edge_switch_max"] <= EDGE_TABLE}


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--workers", type=int, default=2048)
    ap.add_argument("--per-job", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60.0, help="measured window")
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--rank", default=rank_rules.DEFAULT_RULE, choices=rank_rules.names())
    ap.add_argument("--hints", default="on", choices=["on", "off"],
                    help="off: the controller gives no hints (today's reporting)")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pod-workers", type=int, default=0,
                    help="the per-pod deployment (bench/controller/bench_pods.py): a "
                         "controller, fabric and jobs per pod of this many workers")
    ap.add_argument("--pods-in-turn", action="store_true",
                    help="with --pod-workers: every pod's controller and switches up, the "
                         "pods' workers driven one pod at a time (each pod's controller "
                         "with the machine's cores to itself, as on its own server)")
    ap.add_argument("--rules-only", action="store_true",
                    help="only the rules per switch, from the controller's service in this "
                         "process (no controller process, switches or load)")
    args = ap.parse_args(argv)
    if not 1 <= args.per_job <= 256 or args.workers < 2 * args.per_job:
        ap.error("--per-job must be 1..256 and --workers at least two jobs' worth")
    if args.seconds <= 0 or args.warmup < 3:
        ap.error("--seconds must be > 0 and --warmup at least 3")
    cfg = ScaleConfig(workers=args.workers, per_job=args.per_job, seconds=args.seconds,
                      warmup=args.warmup, rank=args.rank, hints=args.hints,
                      connections=args.connections, seed=args.seed,
                      pod_workers=args.pod_workers, pods_in_turn=args.pods_in_turn)
    if args.rules_only:
        r = rules_only(cfg)
        harness.figure("rules per edge switch (max)", r["rules_per_edge_switch_max"],
                       "rules", baseline=EDGE_TABLE, note=f"(baseline: a 2,000-entry table; "
                       f"job rules {r['job_rules_per_edge_switch_max']})")
        harness.write_json(args.json, r)
        return 0
    if args.pods_in_turn and not args.pod_workers:
        ap.error("--pods-in-turn needs --pod-workers")
    if args.pod_workers and (args.workers % args.pod_workers
                             or not 2 * args.per_job <= args.pod_workers < args.workers):
        ap.error("--pod-workers must divide --workers, be below it and hold two jobs")
    try:
        if cfg.pod_workers:
            from bench.controller.bench_pods import run_pods
            r = run_pods(cfg)
        else:
            r = run(cfg)
    except RuntimeError as err:   # the controller could not bring the fabric up: say so
        print(f"NOT MEASURED: {err}", flush=True)
        harness.write_json(args.json, {"workers": args.workers, "error": str(err),
                                       "load_avg": os.getloadavg()})
        return 1
    r["verdicts"] = verdicts(r)
    harness.figure("reports arriving", r["reports_per_s"], "reports/s",
                   baseline=r["reports_per_s_today_client"],
                   note="(baseline: today's client, every worker every max(step, 0.2 s))")
    harness.figure("controller CPU", r["controller_cpu_share"], "of one core",
                   baseline=CPU_BOUND, note="(baseline: the bound)")
    if r["level_change_p99_ms"] is not None:
        harness.figure("level change -> barrier p99", r["level_change_p99_ms"], "ms",
                       baseline=P99_BOUND_MS, note=f"(baseline: the bound; "
                       f"{r['level_changes']} changes, client round trip p99 "
                       f"{r['level_change_rtt_p99_ms']} ms)")
    harness.figure("reports lost", r["lost"], "")
    harness.figure("rules per edge switch (max)", r["rules_per_edge_switch_max"], "rules",
                   baseline=EDGE_TABLE, note=f"(baseline: a 2,000-entry table; job rules "
                   f"{r['job_rules_per_edge_switch_max']})")
    harness.figure("flow mods", r["flow_mods_per_s"], "/s")
    print("VERDICTS " + " ".join(f"{k}={'met' if v else 'NOT met'}"
                                 for k, v in r["verdicts"].items()), flush=True)
    harness.write_json(args.json, r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
