"""The per-pod deployment of docs/design.md ("Where one controller stops"), measured:
a controller per pod of ``--pod-workers`` workers and one for the core, each the real
`sluice controller --pod NAME` process as a deployment starts it (docs/deploy.md, "A
controller per pod": the whole cluster's topology file, its own scope), with its own
fake switches; one load generator drives every pod at once.

    .venv/bin/python -m bench.controller.bench_scale --workers 16384 --pod-workers 2048

The cluster: each pod is the leaf-spine bench_scale builds for that many workers (a
Liquid domain, its hosts in 10.N.0.0/16), and one core switch joins every pod's spines.
Each pod's jobs fit in it (Liquid places a job in one pod); no bench traffic crosses
pods, but every pod's switches hold the prefix routes to the other pods and the core
switch one per pod, installed by the controllers (the rules per edge switch count them).

The figures are those of bench_scale: reports per second (all pods), the CPU of the
busiest pod controller (the bound is per controller: each is one process on one core),
of all of them together and of the core's, level change -> barrier p50/p99 over every
pod's changes, reports lost (all pods), rules per edge switch (the busiest pod).

``--pods-in-turn``: every pod's controller and switches stay up and connected, and the
load generator drives one pod's workers at a time for the whole window (warm-up and
measured), pod after pod. A deployment runs each pod's controller on a server of its
own, and the pods share no state at run time (a pod's reports, ranking and flow mods
never reach another pod's controller), so what a pod's controller does under its own
pod's full load, with the cores to itself, is what it does in the deployment. Driving
every pod together instead puts eight controllers, the load generator for 16,384
workers and every fake switch on this machine's two cores: that measures the machine's
oversubscription, and the bench still does it without the flag. Rates (reports, flow
mods) are each pod's own rate summed over the pods: the cluster's rate when every pod
runs at once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.controller import scale_run as R
from bench.controller import scale_cluster as C
from controller.pods import CORE, pod_scope, scoped_topology


def cluster_dict(pods: int, pod_workers: int) -> dict:
    """The whole cluster as one topology: ``pods`` copies of bench_scale's leaf-spine for
    ``pod_workers`` (switches, racks and hosts named ``p<N>-...``, domain ``pod<N>``,
    hosts in 10.N.0.0/16) and a core switch linked to every spine."""
    out: dict = {"name": f"pods-{pods}x{pod_workers}", "switches": [], "racks": [],
                 "hosts": [], "links": []}
    for n in range(1, pods + 1):
        d, p = C.topology_dict(pod_workers), f"p{n}-"
        out["emulation"] = d["emulation"]
        out["switches"] += [{**sw, "name": p + sw["name"]} for sw in d["switches"]]
        out["racks"] += [{"name": p + r["name"], "tor": p + r["tor"], "domain": f"pod{n}"}
                         for r in d["racks"]]
        base = ipaddress.IPv4Address(f"10.{n}.0.0")
        out["hosts"] += [{**h, "name": p + h["name"], "rack": p + h["rack"],
                          "ip": str(base + k + 1)} for k, h in enumerate(d["hosts"])]
        out["links"] += [{**link, "a": p + link["a"], "b": p + link["b"]}
                         for link in d["links"]]
    spines = [sw["name"] for sw in out["switches"] if sw["role"] == "spine"]
    out["switches"].append({"name": "core1", "role": "core"})
    out["links"] += [{"a": sp, "b": "core1", "bw": 10000} for sp in spines]
    return out


class Pod:
    """One scope (a pod, or the core): its topology, jobs, controller and fake switches."""

    def __init__(self, name: str, index: int, cfg: R.ScaleConfig, cluster: dict, full) -> None:
        self.name, self.cluster = name, cluster
        # each pod's jobs are a bench_scale cluster's of its own size, with its own seed
        self.cfg = replace(cfg, seed=cfg.seed + index, workers=cfg.pod_workers, pod_workers=0)
        self.scope = pod_scope(full, name)
        self.topo_obj = scoped_topology(full, self.scope)
        self.jobs = [] if name == CORE else \
            C.initial_jobs(self.topo_obj, cfg.pod_workers, cfg.per_job, self.cfg.seed)
        self.work = Path(tempfile.mkdtemp(prefix=f"sluice-bench-{name}-"))
        self.proc = self.switches = None
        self.api = 0

    def start(self) -> None:
        self.proc, ofp, self.api = R.start_controller(self.work, self.cluster, self.jobs,
                                                      self.cfg, pod=self.name)
        self.switches = R.Switches(self.cluster, ofp, only=self.scope.owned)

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


def run_pods(cfg: R.ScaleConfig) -> dict:
    n = cfg.workers // cfg.pod_workers
    cluster = cluster_dict(n, cfg.pod_workers)
    full = C.load(cluster)
    scopes = [Pod(f"pod{i + 1}", i, cfg, cluster, full) for i in range(n)]
    core = Pod(CORE, n, cfg, cluster, full)
    t_start = time.monotonic()
    try:
        for scope in scopes + [core]:
            scope.start()
        R.log(f"{n} pod controllers and the core's up; their switches connecting")
        deadline = time.monotonic() + 600
        settled = [s.switches.settle(len(s.scope.owned), max(10.0, deadline - time.monotonic()))
                   for s in scopes + [core]]
        setup_s = time.monotonic() - t_start
        R.log(f"every scope's switches hold their rules ({sum(s['rules_total'] for s in settled)}"
              f" in all) after {time.monotonic() - t_start:.1f} s")
        load_avg0 = os.getloadavg()
        core_cpu0, t0 = R.cpu_s(core.proc.pid), time.monotonic()
        if cfg.pods_in_turn:
            outs = []
            for k, pod in enumerate(scopes):
                R.log(f"driving {pod.name} alone ({k + 1} of {len(scopes)})")
                outs += asyncio.run(_drive_all([pod]))
        else:
            outs = asyncio.run(_drive_all(scopes))
        core_cpu = (R.cpu_s(core.proc.pid) - core_cpu0) / (time.monotonic() - t0)
        core_rules = core.switches.stats()["rules_total"]
        held = [R.held_batches(s.api) for s in scopes]
    finally:
        for scope in scopes + [core]:
            scope.stop()
    r = _figures(cfg, scopes, outs, held, load_avg0)
    r.update(core_controller_cpu_share=round(core_cpu, 4), core_switch_rules=core_rules,
             setup_s=round(setup_s, 1))
    return r


async def _drive_all(pods: list[Pod]) -> list[dict]:
    return await asyncio.gather(*(R.drive(p.topo_obj, p.jobs, p.api, p.cfg, p.proc.pid,
                                          p.switches) for p in pods))


def _figures(cfg: R.ScaleConfig, pods, outs, held, load_avg0) -> dict:
    changes = [ms for o in outs for ms in o["fig"].level_changes_ms]
    rtts = [ms for o in outs for ms in o["fig"].level_changes_rtt_ms]
    window = max(o["window_s"] for o in outs)

    def summed_rate(of) -> float:      # each pod's rate over its own window, summed
        return round(sum(of(o) / o["window_s"] for o in outs), 1)

    missing = sum(1 for o, h in zip(outs, held)
                  for k, b in o["fig"].acked.items() if k in h and h[k] < b)
    not_applied = sum(o["fig"].not_applied for o in outs)
    edge = max(o["sw1"]["rules_per_edge_switch_max"] for o in outs)
    return {
        "workers": cfg.workers, "pods": len(pods), "pod_workers": cfg.pod_workers,
        "jobs": sum(len(p.jobs) for p in pods), "per_job": cfg.per_job,
        "switches": sum(len(p.scope.owned) for p in pods) + 1, "rank": cfg.rank,
        "hints": cfg.hints, "seconds": round(window, 1),
        "pods_driven": "in turn" if cfg.pods_in_turn else "together",
        "reports_per_s": summed_rate(lambda o: o["fig"].reports),
        "reports_per_s_today_client": round(sum(R.today_rate(p.jobs) for p in pods), 1),
        "controller_cpu_share": round(max(o["cpu"] for o in outs), 4),
        "controller_cpu_share_each": [round(o["cpu"], 4) for o in outs],
        "controllers_cpu_share_sum": round(sum(o["cpu"] for o in outs), 4),
        "load_generator_cpu_share": round(max(o["load_cpu"] for o in outs), 4),
        "level_changes": len(changes),
        "level_change_p50_ms": R.pct(changes, 0.5),
        "level_change_p99_ms": R.pct(changes, 0.99),
        "level_change_p99_ms_each": [R.pct(o["fig"].level_changes_ms, 0.99) for o in outs],
        "level_change_rtt_p99_ms": R.pct(rtts, 0.99),
        "level_changes_not_applied": not_applied,
        "lost": sum(o["fig"].lost for o in outs) + missing + not_applied,
        "acked_not_held": missing,
        "arrivals": sum(o["fig"].arrivals for o in outs),
        "removals": sum(o["fig"].removals for o in outs),
        "admin_errors": [e for o in outs for e in o["fig"].admin_errors][:5],
        "flow_mods_per_s": summed_rate(lambda o: o["sw1"]["flow_mods"] - o["sw0"]["flow_mods"]),
        "switch_reconnects": sum(o["sw1"]["reconnects"] - o["sw0"]["reconnects"] for o in outs),
        "rules_total": sum(o["sw1"]["rules_total"] for o in outs),
        # counted by the switches: the pod's own rules and its prefix routes to the others
        "rules_per_edge_switch_max": edge,
        "prefix_routes_per_edge_switch": max(len(p.scope.remote) for p in pods),
        "job_rules_per_edge_switch_max": max(o["sw1"]["job_rules_per_edge_switch_max"]
                                             for o in outs),
        "load_avg_before": load_avg0, "load_avg_after": os.getloadavg()}
