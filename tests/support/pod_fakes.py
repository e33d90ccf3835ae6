"""A fabric run by a controller per pod, without switches: one service per scope (each
pod, and the core), each with its own TableSink, the switches numbered as Mininet
numbers them; packets are walked across the scopes' tables hop by hop."""

from __future__ import annotations

from controller.fake_fabric import wiring
from controller.pods import pod_scope, scoped_topology
from controller.service import ControllerService
from controller.sinks import TableSink
from controller.config import ControllerConfig
from support.controller_fakes import ADMIN
from topologies import load_topology
from topologies.mininet_topo import mac_of


def make_pod_services(topology="two-pod", scopes=("pod1", "pod2", "core"), **config):
    """scope name -> its service, every switch of the scope connected, every link with
    an owned end seen (LLDP from either side) and every host of the pod located."""
    full = load_topology(topology) if isinstance(topology, str) else topology
    config.setdefault("rank", "progress")
    wires = wiring(full)
    dpid = {s.name: s.dpid for s in full.switches}
    out = {}
    for name in scopes:
        scope = pod_scope(full, name)
        svc = ControllerService(ControllerConfig(topology=scoped_topology(full, scope),
                                                 admin_token=ADMIN, scope=scope, **config),
                                sink=TableSink())
        for s in sorted(scope.owned):
            ports = {p: f"{s}-eth{p}" for (n, p) in wires if n == s}
            svc.switch_up(dpid[s], ports)
        for (a, pa), (b, pb) in wires.items():
            if a in dpid and b in dpid and (a in scope.owned or b in scope.owned):
                svc.link_seen((dpid[a], pa), (dpid[b], pb))
        for h in svc.config.topology.hosts:
            (tor, port), = [(n, p) for (hn, _), (n, p) in wires.items() if hn == h.name]
            svc.host_seen(h.ip, dpid[tor], port, mac_of(h.ip))
        out[name] = svc
    return full, out


def walk_pods(full, services, src_host, dst_ip, eth_dst, tcp_dst=None, max_hops=16):
    """Send a packet from ``src_host`` to ``dst_ip`` addressed to ``eth_dst``; each switch
    is looked up in the table of the scope that owns it. Returns (where it ended, the
    switches it crossed, the packet as it arrived)."""
    wires = wiring(full)
    by_name = {s.name: s.dpid for s in full.switches}
    owner = {n: svc for svc in services.values() for n in svc.config.scope.owned}
    src = full.host_by_name[src_host]
    pkt = {"eth_type": 0x0800, "ipv4_src": src.ip, "ipv4_dst": dst_ip, "ip_dscp": 0,
           "eth_dst": eth_dst}
    if tcp_dst is not None:
        pkt.update(ip_proto=6, tcp_dst=tcp_dst)
    node, port = wires[(src_host, 0)]
    hops = []
    for _ in range(max_hops):
        hops.append(node)
        pkt["in_port"] = port
        if node not in owner:
            return f"unowned:{node}", hops, pkt
        what, out = owner[node].sink.table.process(by_name[node], pkt)
        if what != "output":
            return f"{what}:{node}", hops, pkt
        node, port = wires[(node, out)]
        if node in full.host_by_name:
            return node, hops, pkt
    return "loop", hops, pkt
