"""What the northbound API shows (read only): jobs, flows, rules, links, metrics.

Each answer is read under the shared lock (and the report lock where batches are read),
so it is one consistent moment of the controller's state.
"""

from __future__ import annotations

from typing import Any

from sluice_common import job_rank, rank_rules
from controller import rules as R
from controller.errors import NotFound
from controller.ranking import ordered
from controller.reconcile import Reconciler
from controller.state import Shared
from topologies.priority_classes import dscp_of_level


def _finite(x: float) -> float | None:
    return None if x == float("inf") else round(x)


class Views:
    def __init__(self, shared: Shared, reconciler: Reconciler) -> None:
        self.s, self.reconciler = shared, reconciler

    def jobs(self) -> list[dict[str, Any]]:
        s = self.s
        with s.lock, s.report_lock:
            out = []
            for j in s.registry.jobs.values():
                load = self.reconciler.job_load(j)
                levels = {self.reconciler.levels.get(f) for f in j.flows()} - {None}
                out.append({**j.to_dict(), "done_batches": load.done_batches,
                            "remaining_bytes": _finite(job_rank.remaining_bytes(load)),
                            "attained_bytes": round(job_rank.attained_bytes(load)),
                            "levels": sorted(levels)})
            return out

    def flows(self, job_id: str | None = None) -> dict[str, Any]:
        s = self.s
        with s.lock:
            if job_id is not None and job_id not in s.registry.jobs:
                raise NotFound(f"no job '{job_id}'")
            cookie_of = {j.id: j.cookie for j in s.registry.jobs.values()}
            by_match: dict[tuple, list[R.Rule]] = {}
            for r in s.installed.rules.values():
                if r.priority in (R.PRIO_JOB_FLOW, R.PRIO_JOB_ACK):  # keyed without in_port
                    match = tuple(kv for kv in r.match if kv[0] != "in_port")
                    by_match.setdefault(match, []).append(r)

            def installed(match: tuple, job: str) -> list[dict[str, Any]]:
                return [r.to_json() for r in by_match.get(match, [])
                        if r.cookie == cookie_of[job]]

            out = []
            with s.report_lock:
                snapshot = list(s.registry.flows_with_batches())
            for flow, batch in ordered(snapshot):
                if job_id is not None and flow.job != job_id:
                    continue
                level = self.reconciler.levels.get(flow)
                out.append({"job": flow.job, "kind": flow.kind, "worker": flow.worker,
                            "server": flow.server, "src": flow.src_ip, "dst": flow.dst_ip,
                            "dst_port": flow.dst_port, "batch": batch, "level": level,
                            "dscp": dscp_of_level(level) if level is not None else None,
                            "rules": installed(R.flow_match(flow), flow.job),
                            "ack_rules": installed(R.ack_match(flow), flow.job)})
            return {"enforce": s.config.enforce, "levels": s.config.levels,
                    "rank": s.rank, "flows": out}

    def rules(self) -> list[dict[str, Any]]:
        with self.s.lock:
            return [r.to_json() for r in sorted(self.s.installed.rules.values(),
                                                key=lambda r: (r.dpid, r.table, -r.priority, r.match))]

    def links(self) -> dict[str, Any]:
        s = self.s
        with s.lock:
            hosts_at = {(l.dpid, l.port): s.fabric.host_by_ip[ip].name
                        for ip, l in s.fabric.hosts.items()}
            out = []
            for (dpid, port), rate in sorted(s.linkstats.rates.items()):
                peer = s.fabric.links.get((dpid, port))
                entry = {"switch": s.switch_name(dpid), "dpid": dpid, "port": port,
                         "port_name": s.fabric.ports.get(dpid, {}).get(port),
                         "tx_bytes_per_s": round(rate.tx_bps, 1),
                         "rx_bytes_per_s": round(rate.rx_bps, 1),
                         "tx_bytes": rate.tx_bytes, "rx_bytes": rate.rx_bytes,
                         "peer": s.switch_name(peer[0]) if peer else hosts_at.get((dpid, port))}
                out.append(entry)
            return {"ports": out}

    def rules_by_level(self) -> dict[int, int]:
        """Job flow rules wanted per priority level (0 = most urgent)."""
        with self.s.lock:
            out: dict[int, int] = {}
            for level, rules in self.reconciler.flow_rules.values():
                out[level] = out.get(level, 0) + len(rules)
            return out

    def link_utilisation(self) -> list[dict[str, Any]]:
        """Per switch port with a known peer: send rate / capacity of its link (the
        emulated capacity, bw * emulation.bw_scale, when the fabric is Mininet)."""
        topo = self.s.config.topology
        out = []
        for port in self.links()["ports"]:
            name, peer = port["switch"], port["peer"]
            if peer is None or not topo.graph.has_edge(name, peer):
                continue
            capacity = topo.graph.edges[name, peer]["bw"] * topo.emulation_bw_scale
            tx_mbps = port["tx_bytes_per_s"] * 8 / 1e6
            out.append({"switch": name, "port": port["port"], "peer": peer,
                        "capacity_mbps": capacity, "tx_mbps": tx_mbps,
                        "utilisation": tx_mbps / capacity})
        return out

    def metrics_text(self) -> str:
        s, m = self.s, self.s.metrics
        with s.lock:
            m.set("sluice_jobs_active", len(s.registry.jobs))
            m.set("sluice_switches_connected", len(s.fabric.connected))
            m.set("sluice_hosts_located", len(s.fabric.hosts))
            m.set("sluice_links_discovered", len(s.fabric.links) // 2)
            m.set("sluice_rules_installed", len(s.installed.rules))
            m.clear("sluice_rules_by_level")
            by_level = self.rules_by_level()
            # every level present, 0 included: a rate() over them must not see gaps
            for level in sorted(set(range(s.config.levels)) | set(by_level)):
                m.set("sluice_rules_by_level", by_level.get(level, 0), level=str(level))
            for name in ("sluice_port_tx_bytes", "sluice_port_rx_bytes",
                         "sluice_port_tx_bytes_per_second", "sluice_link_utilisation_ratio"):
                m.clear(name)       # ports of a switch that went away must not linger
            for rule in rank_rules.names():   # one series per rule, 1 for the active one
                m.set("sluice_rank_rule", int(rule == s.rank), rule=rule)
            for (dpid, port), rate in s.linkstats.rates.items():
                labels = {"switch": s.switch_name(dpid), "port": str(port)}
                m.set("sluice_port_tx_bytes", rate.tx_bytes, **labels)
                m.set("sluice_port_rx_bytes", rate.rx_bytes, **labels)
                m.set("sluice_port_tx_bytes_per_second", rate.tx_bps, **labels)
            utilisation = self.link_utilisation()
            for entry in utilisation:
                m.set("sluice_link_utilisation_ratio", entry["utilisation"],
                      switch=entry["switch"], port=str(entry["port"]), peer=entry["peer"])
            m.set("sluice_bottleneck_utilisation_ratio",
                  max((e["utilisation"] for e in utilisation), default=0.0))
        return m.render()
