"""The live picture: what ``GET /live`` draws, as one JSON document (``GET /live/state``).

The fabric (switches and hosts placed in tiers, every link with its capacity and its
measured utilisation, the busier direction), each job's placement (which host runs its
servers and workers) and progress (each worker's batch), and each flow's priority level.
The page (``static/live.html``, plain JS and SVG, no third-party code) polls this once a
second. Pure functions of the service's views, tested without a browser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from topologies import Topology

PAGE = Path(__file__).parent / "static" / "live.html"
TIERS = ("core", "spine", "agg", "tor", "host")


def layout(topology: Topology) -> dict[str, tuple[float, float]]:
    """name -> (x, y) in [0, 1]: one row per tier present (core at the top, hosts at the
    bottom); hosts in rack order, so each rack sits under its ToR."""
    rows: dict[str, list[str]] = {}
    for s in topology.switches:
        rows.setdefault(s.role, []).append(s.name)
    rows["host"] = [h.name for r in topology.racks for h in topology.hosts_by_rack[r.name]]
    present = [t for t in TIERS if rows.get(t)]
    out = {}
    for i, tier in enumerate(present):
        names = rows[tier]
        y = (i + 0.5) / len(present)
        for k, name in enumerate(names):
            out[name] = ((k + 0.5) / len(names), y)
    return out


def link_load(topology: Topology, ports: list[dict[str, Any]]) -> dict[tuple[str, str], dict]:
    """(a, b) sorted -> {mbps, utilisation}: the busier direction of each link, from the
    controller's per-port rates (a port's tx is one direction, its rx the other)."""
    out: dict[tuple[str, str], dict] = {}
    scale = topology.emulation_bw_scale
    for p in ports:
        a, b = p.get("switch"), p.get("peer")
        if b is None or not topology.graph.has_edge(a, b):
            continue
        key = tuple(sorted((a, b)))
        mbps = max(p.get("tx_bytes_per_s", 0.0), p.get("rx_bytes_per_s", 0.0)) * 8 / 1e6
        capacity = topology.graph.edges[a, b]["bw"] * scale
        if key not in out or mbps > out[key]["mbps"]:
            out[key] = {"mbps": round(mbps, 3), "utilisation": round(mbps / capacity, 4)}
    return out


def live_state(topology: Topology, jobs: list[dict], flows: list[dict],
               ports: list[dict]) -> dict[str, Any]:
    """The page's data: from ``service.jobs()``, ``service.flows()['flows']`` and
    ``service.links()['ports']``."""
    pos = layout(topology)
    host_of_ip = {h.ip: h.name for h in topology.hosts}
    loads = link_load(topology, ports)
    nodes = [{"name": s.name, "kind": "switch", "role": s.role, "x": pos[s.name][0],
              "y": pos[s.name][1]} for s in topology.switches]
    nodes += [{"name": h.name, "kind": "host", "rack": h.rack, "gpus": h.gpus, "ip": h.ip,
               "x": pos[h.name][0], "y": pos[h.name][1]} for h in topology.hosts]
    links = []
    for link in topology.all_links():
        key = tuple(sorted((link.a, link.b)))
        load = loads.get(key, {"mbps": 0.0, "utilisation": 0.0})
        links.append({"a": link.a, "b": link.b, "id": "-".join(key),
                      "capacity_mbps": link.bw * topology.emulation_bw_scale, **load})

    def endpoint(e: dict) -> dict:
        return {"id": e["id"], "ip": e["ip"], "host": host_of_ip.get(e["ip"], e["ip"])}

    job_view = []
    for j in jobs:
        batches = j.get("batches", {})
        workers = [{**endpoint(w), "batch": batches.get(w["id"], 0)} for w in j["workers"]]
        job_view.append({"id": j["id"], "servers": [endpoint(s) for s in j["servers"]],
                         "workers": workers,
                         "min_batch": min((w["batch"] for w in workers), default=0),
                         "max_batch": max((w["batch"] for w in workers), default=0)})
    flow_view = [{"job": f["job"], "kind": f["kind"], "worker": f["worker"],
                  "server": f["server"], "src": host_of_ip.get(f["src"], f["src"]),
                  "dst": host_of_ip.get(f["dst"], f["dst"]), "batch": f.get("batch"),
                  "level": f.get("level"), "dscp": f.get("dscp")} for f in flows]
    busiest = max(links, key=lambda l: l["utilisation"], default=None)
    return {"topology": topology.name, "nodes": nodes, "links": links, "jobs": job_view,
            "flows": flow_view,
            "bottleneck": busiest["id"] if busiest and busiest["utilisation"] > 0 else None}
