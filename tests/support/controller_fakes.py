"""A fake fabric for controller unit tests: the switches are FlowTables (the TableSink of
the service), ports are numbered exactly as the Mininet fabric numbers them
(``topologies.mininet_topo.emulated_links``), and packets are walked hop by hop."""

from __future__ import annotations

from controller.fake_fabric import wiring
from controller.service import ControllerService
from controller.sinks import TableSink
from controller.config import ControllerConfig
from topologies import load_topology

ADMIN = "admin-token-for-tests"


def make_service(topology="two-rack", **config):
    topo = load_topology(topology) if isinstance(topology, str) else topology
    # These fakes' tests check per-worker ranking (the progress rule); tests of the job
    # rules (remaining, attained) ask for them by name.
    config.setdefault("rank", "progress")
    cfg = ControllerConfig(topology=topo, admin_token=ADMIN, **config)
    return ControllerService(cfg, sink=TableSink())


def walk(service, src_host, dst_ip, tcp_dst=None, max_hops=16, src_ip=None, dscp=0,
         tcp_src=None):
    """Send a packet from ``src_host`` (source address ``src_ip``, default its own; DSCP
    ``dscp`` as the host marked it); returns (where it ended, hops, dscp on arrival).
    Where: a host name, or 'drop:<switch>' / 'controller:<switch>' / 'loop'."""
    t = service.config.topology
    wires = wiring(t)
    by_dpid = {s.name: s.dpid for s in t.switches}
    src = t.host_by_name[src_host]
    pkt = {"eth_type": 0x0800, "ipv4_src": src_ip or src.ip, "ipv4_dst": dst_ip,
           "ip_dscp": dscp}
    if tcp_dst is not None:
        pkt.update(ip_proto=6, tcp_dst=tcp_dst)
    if tcp_src is not None:
        pkt.update(ip_proto=6, tcp_src=tcp_src)
    node, port = wires[(src_host, 0)]
    hops = []
    for _ in range(max_hops):
        hops.append(node)
        pkt["in_port"] = port
        what, out = service.sink.table.process(by_dpid[node], pkt)
        if what == "drop":
            return f"drop:{node}", hops, pkt["ip_dscp"]
        if what == "controller":
            return f"controller:{node}", hops, pkt["ip_dscp"]
        node, port = wires[(node, out)]
        if node in t.host_by_name:
            return node, hops, pkt["ip_dscp"]
    return "loop", hops, pkt["ip_dscp"]


_NORTHBOUND: dict[int, tuple] = {}


def northbound(service):
    """The service behind its tokens and rate limits, as the REST API calls it (one guard
    per service, so that rate limits hold across calls)."""
    from controller.auth import Northbound
    held = _NORTHBOUND.get(id(service))
    if held is None or held[0] is not service:
        held = _NORTHBOUND[id(service)] = (service, Northbound(service))
    return held[1]
