"""Discovery of a described fabric without switches: what the os-ken app would report
after LLDP and ARP (every switch connected with Mininet's port numbering, every link
seen, every host located). For unit tests and benchmarks that drive the service with a
:class:`~controller.service.TableSink` instead of real switches."""

from __future__ import annotations

from topologies.mininet_topo import emulated_links, mac_of


def wiring(topology):
    """(switch name, port) -> (peer name, peer port); hosts have port 0."""
    out = {}
    for link in emulated_links(topology):
        out[(link.a, link.port_a)] = (link.b, link.port_b)
        out[(link.b, link.port_b)] = (link.a, link.port_a)
    return out


def bring_up(service, hosts=True, links=True):
    """Connect every switch, discover every link, locate every host (as the app would
    after LLDP and ARP)."""
    t = service.config.topology
    wires = wiring(t)
    dpid = {s.name: s.dpid for s in t.switches}
    for s in t.switches:
        ports = {p: f"{s.name}-eth{p}" for (n, p) in wires if n == s.name}
        service.switch_up(s.dpid, ports)
    if links:
        for (a, pa), (b, pb) in wires.items():
            if a in dpid and b in dpid:
                service.link_seen((dpid[a], pa), (dpid[b], pb))
    if hosts:
        for h in t.hosts:
            (tor, port), = [(n, p) for (hn, _), (n, p) in wires.items() if hn == h.name]
            service.host_seen(h.ip, dpid[tor], port, mac_of(h.ip))
    return service
