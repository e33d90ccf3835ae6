"""The per-pod deployment of docs/design.md ("Where one controller stops"), measured:
a controller per pod of ``--pod-workers`` workers, each the real `sluice controller`
process with its own fake fabric (the pod's leaves and spines) and the jobs placed in
the pod; one load generator drives every pod at once.

    .venv/bin/python -m bench.controller.bench_scale --workers 16384 --pod-workers 2048

What is emulated and what is not: each pod is the leaf-spine bench_scale builds for
that many workers, its jobs fit in it (Liquid places a job in one pod), and nothing
crosses pods. Each pod's controller is started on its pod's own topology, which is
what `sluice controller --pod NAME` manages less the links to the core: the core
controller and the prefix routes (built: controller/pods.py, docs/deploy.md) are not
started here, since no traffic of the bench leaves a pod. The rules per edge switch
are the pod's own plus one prefix route per other pod (counted, not installed: the
figure says so).

The figures are those of bench_scale: reports per second (all pods), the CPU of the
busiest controller (the bound is per controller: each is one process on one core) and
of all of them together, level change -> barrier p50/p99 over every pod's changes,
reports lost (all pods), rules per edge switch (the busiest pod).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.controller import bench_scale as B
from bench.controller import scale_cluster as C


class Pod:
    """One pod: its topology, jobs, controller process and fake switches."""

    def __init__(self, index: int, cfg: B.ScaleConfig) -> None:
        self.index = index
        # each pod is a bench_scale cluster of its own size, with its own seed
        self.cfg = replace(cfg, seed=cfg.seed + index, workers=cfg.pod_workers, pod_workers=0)
        self.topo = C.topology_dict(cfg.pod_workers)
        self.topo_obj = C.load(self.topo)
        self.jobs = C.initial_jobs(self.topo_obj, cfg.pod_workers, cfg.per_job, self.cfg.seed)
        self.work = Path(tempfile.mkdtemp(prefix=f"sluice-bench-pod{index}-"))
        self.proc = self.switches = None
        self.api = 0

    def start(self) -> None:
        self.proc, ofp, self.api = B.start_controller(self.work, self.topo, self.jobs,
                                                      self.cfg)
        self.switches = B.Switches(self.topo, ofp)

    def stop(self) -> None:
        if self.switches is not None:
            self.switches.stop()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def run_pods(cfg: B.ScaleConfig) -> dict:
    pods = [Pod(i, cfg) for i in range(cfg.workers // cfg.pod_workers)]
    t_start = time.monotonic()
    try:
        for pod in pods:
            pod.start()
        B.log(f"{len(pods)} controllers up; their switches connecting")
        deadline = time.monotonic() + 600
        settled = [pod.switches.settle(len(pod.topo_obj.switches),
                                       max(10.0, deadline - time.monotonic())) for pod in pods]
        B.log(f"every pod's switches hold their rules ({sum(s['rules_total'] for s in settled)}"
              f" in all) after {time.monotonic() - t_start:.1f} s")
        load_avg0 = os.getloadavg()
        outs = asyncio.run(_drive_all(pods))
        held = [B.held_batches(pod.api) for pod in pods]
    finally:
        for pod in pods:
            pod.stop()
    return _figures(cfg, pods, outs, held, load_avg0, t_start)


async def _drive_all(pods: list[Pod]) -> list[dict]:
    return await asyncio.gather(*(B.drive(p.topo_obj, p.jobs, p.api, p.cfg, p.proc.pid,
                                          p.switches) for p in pods))


def _figures(cfg: B.ScaleConfig, pods, outs, held, load_avg0, t_start) -> dict:
    changes = [ms for o in outs for ms in o["fig"].level_changes_ms]
    rtts = [ms for o in outs for ms in o["fig"].level_changes_rtt_ms]
    window = max(o["window_s"] for o in outs)
    missing = sum(1 for o, h in zip(outs, held)
                  for k, b in o["fig"].acked.items() if k in h and h[k] < b)
    not_applied = sum(o["fig"].not_applied for o in outs)
    edge = max(o["sw1"]["rules_per_edge_switch_max"] for o in outs)
    return {
        "workers": cfg.workers, "pods": len(pods), "pod_workers": cfg.pod_workers,
        "jobs": sum(len(p.jobs) for p in pods), "per_job": cfg.per_job,
        "switches": sum(len(p.topo_obj.switches) for p in pods), "rank": cfg.rank,
        "hints": cfg.hints, "seconds": round(window, 1),
        "reports_per_s": round(sum(o["fig"].reports for o in outs) / window, 1),
        "reports_per_s_today_client": round(sum(B.today_rate(p.jobs) for p in pods), 1),
        "controller_cpu_share": round(max(o["cpu"] for o in outs), 4),
        "controller_cpu_share_each": [round(o["cpu"], 4) for o in outs],
        "controllers_cpu_share_sum": round(sum(o["cpu"] for o in outs), 4),
        "load_generator_cpu_share": round(outs[0]["load_cpu"], 4),
        "level_changes": len(changes),
        "level_change_p50_ms": B.pct(changes, 0.5),
        "level_change_p99_ms": B.pct(changes, 0.99),
        "level_change_rtt_p99_ms": B.pct(rtts, 0.99),
        "level_changes_not_applied": not_applied,
        "lost": sum(o["fig"].lost for o in outs) + missing + not_applied,
        "acked_not_held": missing,
        "arrivals": sum(o["fig"].arrivals for o in outs),
        "removals": sum(o["fig"].removals for o in outs),
        "admin_errors": [e for o in outs for e in o["fig"].admin_errors][:5],
        "flow_mods_per_s": round(sum(o["sw1"]["flow_mods"] - o["sw0"]["flow_mods"]
                                     for o in outs) / window, 1),
        "switch_reconnects": sum(o["sw1"]["reconnects"] - o["sw0"]["reconnects"] for o in outs),
        "rules_total": sum(o["sw1"]["rules_total"] for o in outs),
        # what an edge switch would hold: the pod's own rules, counted by its switches,
        # and one prefix route per other pod from the core layer (not built: counted)
        "rules_per_edge_switch_max": edge + len(pods) - 1,
        "rules_per_edge_switch_installed_max": edge,
        "prefix_routes_not_installed_per_edge_switch": len(pods) - 1,
        "job_rules_per_edge_switch_max": max(o["sw1"]["job_rules_per_edge_switch_max"]
                                             for o in outs),
        "setup_s": round(time.monotonic() - t_start - window - cfg.warmup, 1),
        "load_avg_before": load_avg0, "load_avg_after": os.getloadavg()}
