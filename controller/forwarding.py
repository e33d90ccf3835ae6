"""Shortest-path forwarding over the described fabric (pure).

How the controller learns ports (documented choice): the topology description says which
switches are linked and which host sits under which ToR, but not OVS port numbers (those
follow Mininet's link creation order). So the controller *learns* them:

- switch <-> switch ports by LLDP: on connect it sends an LLDP frame (os-ken's
  ``LLDPPacket``) out of every port; the neighbour's packet-in names (dpid, port) on both
  ends. Only links the description declares are used (a stray cable is ignored).
- host ports from ARP: all ARP goes to the controller, never flooded. A host's ARP (or
  its reply to the controller's ARP probe) arrives at its ToR on its port; it is accepted
  only if the IP is a described host of that ToR's rack.

Forwarding is loop-free by construction: for destination host d under ToR t, every switch
forwards to a neighbour one hop closer to t (BFS distances on the discovered switch
graph). Equal-cost next hops (leaf-spine, fat-tree) are spread by destination IP, so
different destinations use different spines, deterministically.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import networkx as nx

from topologies import Topology


# Cost of a hop touching a switch whose control channel is down (see next_ports): more
# than any detour through managed switches in the fabrics sluice builds.
AVOID_COST = 1000


@dataclass(frozen=True)
class HostLocation:
    ip: str
    dpid: int
    port: int
    mac: str


@dataclass
class FabricView:
    """What the controller knows about the live fabric; filled by the app's events."""
    topology: Topology
    # (dpid, port) -> (peer dpid, peer port), both directions, only described links
    links: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    hosts: dict[str, HostLocation] = field(default_factory=dict)     # ip -> location
    ports: dict[int, dict[int, str]] = field(default_factory=dict)   # dpid -> port -> name
    connected: set[int] = field(default_factory=set)
    # the switches this controller manages (a controller per pod: controller/pods.py);
    # None: every switch of the topology. The others are named only as link ends.
    owned: frozenset[int] | None = None

    def __post_init__(self) -> None:
        t = self.topology
        self.name_of_dpid = {s.dpid: s.name for s in t.switches}
        self.dpid_of_name = {s.name: s.dpid for s in t.switches}
        self.described_pairs = {frozenset((self.dpid_of_name[l.a], self.dpid_of_name[l.b]))
                                for l in t.links}
        self.host_by_ip = {h.ip: h for h in t.hosts}
        self.tor_dpid_of_ip = {h.ip: self.dpid_of_name[t.rack_by_name[h.rack].tor]
                               for h in t.hosts}

    def owns(self, dpid: int) -> bool:
        return dpid in self.name_of_dpid and (self.owned is None or dpid in self.owned)

    # ---- updates (return True when something changed) --------------------------------
    def add_link(self, src: tuple[int, int], dst: tuple[int, int]) -> bool:
        """An LLDP frame sent from ``src`` arrived at ``dst``."""
        if frozenset((src[0], dst[0])) not in self.described_pairs:
            return False
        if self.links.get(src) == dst and self.links.get(dst) == src:
            return False
        self.links[src] = dst
        self.links[dst] = src
        return True

    def is_link_port(self, dpid: int, port: int) -> bool:
        return (dpid, port) in self.links

    def learn_host(self, ip: str, dpid: int, port: int, mac: str) -> bool:
        """A host spoke on (dpid, port). Accepted only for a described host under this
        ToR on a port that is not a switch link, and not while the address is bound to
        another live port; returns True when the location changed."""
        if self.tor_dpid_of_ip.get(ip) != dpid or self.is_link_port(dpid, port):
            return False
        old = self.hosts.get(ip)
        if old is not None and old.port != port and old.port in self.ports.get(dpid, {}):
            # The address is bound to a port that is still there: another host claiming
            # it (ARP spoofing) does not move the binding. A real move unplugs the old
            # port first (prune_ports forgets the binding).
            return False
        loc = HostLocation(ip, dpid, port, mac.lower())
        if self.hosts.get(ip) == loc:
            return False
        self.hosts[ip] = loc
        return True

    def switch_down(self, dpid: int) -> None:
        """The switch's control channel dropped (or echo liveness gave up on it). Its
        links and hosts are kept: if only the channel is gone it still forwards
        (fail-mode secure), and where it is the only way (a ToR) routing through it is
        the best there is; :meth:`next_ports` routes around it wherever it can. A dead
        link shows up as a port-status change on the neighbour (:meth:`prune_ports`)."""
        self.connected.discard(dpid)

    def prune_ports(self, dpid: int, ports: dict[int, str]) -> None:
        """``ports`` is the switch's current port list: forget links and hosts on ports
        it no longer has."""
        self.ports[dpid] = dict(ports)
        for key in [k for k in self.links if k[0] == dpid and k[1] not in ports]:
            self.links.pop(self.links.pop(key), None)
        for ip in [ip for ip, l in self.hosts.items() if l.dpid == dpid and l.port not in ports]:
            del self.hosts[ip]

    # ---- persistence (the controller's state file) --------------------------------------
    def to_dict(self) -> dict:
        """Links, host locations and port lists: what a restarted controller needs to
        route at once instead of waiting for LLDP/ARP to find everything again."""
        return {"links": [[a, pa, b, pb] for (a, pa), (b, pb) in sorted(self.links.items())],
                "hosts": [[l.ip, l.dpid, l.port, l.mac] for l in self.hosts.values()],
                "ports": {str(d): {str(p): n for p, n in ps.items()}
                          for d, ps in self.ports.items()}}

    def restore(self, data: dict) -> None:
        """Inverse of :meth:`to_dict`. Entries the description does not allow are
        skipped (the same checks as live discovery); malformed ones raise."""
        self.ports = {int(d): {int(p): str(n) for p, n in ps.items()}
                      for d, ps in data["ports"].items()}
        for a, pa, b, pb in data["links"]:
            self.add_link((int(a), int(pa)), (int(b), int(pb)))
        for ip, dpid, port, mac in data["hosts"]:
            if str(ip) in self.tor_dpid_of_ip:
                self.learn_host(str(ip), int(dpid), int(port), str(mac))

    def edge_ports(self, dpid: int) -> list[int]:
        """Ports of ``dpid`` that are not switch links (where hosts can be)."""
        return sorted(p for p in self.ports.get(dpid, {}) if not self.is_link_port(dpid, p))

    # ---- computation -----------------------------------------------------------------
    def switch_graph(self) -> nx.Graph:
        """Connected switches and every known link, also those of switches whose control
        channel is down (they still forward, see :meth:`switch_down`)."""
        g = nx.Graph()
        g.add_nodes_from(self.connected)
        for (a, pa), (b, _pb) in self.links.items():
            g.add_edge(a, b)
            g.edges[a, b][f"port_{a}"] = pa
        return g

    def next_ports(self) -> dict[int, dict[str, int]]:
        """dpid -> {dst_ip: out_port} for every learned host reachable from the switch.

        Shortest paths where a hop through a switch whose control channel is down costs
        AVOID_COST instead of 1: such a switch may be dead (echo liveness gave up on it)
        or unmanaged, so traffic goes around it wherever another path exists (spines of
        leaf-spine/fat-tree), and through it only where it is the only way (a ToR)."""
        g = self.switch_graph()
        for a, b in g.edges:
            g.edges[a, b]["cost"] = AVOID_COST if (a not in self.connected or
                                                  b not in self.connected) else 1
        port_to = {(a, b): pa for (a, pa), (b, _) in self.links.items()}
        out: dict[int, dict[str, int]] = {d: {} for d in g.nodes}
        # Every host behind one switch has the same distances and the same next hops
        # to choose from (only its address picks among them): computed once per switch,
        # not per host (2,048 hosts behind 128 ToRs: 16 times fewer Dijkstras).
        choices: dict[int, list[tuple[int, list[int]]]] = {}
        for ip, loc in sorted(self.hosts.items()):
            if loc.dpid not in g:
                continue
            if loc.dpid not in choices:
                choices[loc.dpid] = self._next_hops(g, loc.dpid, port_to)
            salt = int(ipaddress.IPv4Address(ip))
            out[loc.dpid][ip] = loc.port
            for s, ports in choices[loc.dpid]:
                out[s][ip] = ports[salt % len(ports)]
        return out

    @staticmethod
    def _next_hops(g: nx.Graph, target: int,
                   port_to: dict[tuple[int, int], int]) -> list[tuple[int, list[int]]]:
        """(switch, its out ports towards ``target`` on a shortest path, in the order of
        the neighbours' dpids) for every other switch that reaches ``target``."""
        dist = nx.single_source_dijkstra_path_length(g, target, weight="cost")
        out = []
        for s, d in dist.items():
            if s != target:
                closer = sorted(n for n in g.neighbors(s)
                                if dist.get(n, -1) + g.edges[s, n]["cost"] == d)
                out.append((s, [port_to[(s, n)] for n in closer]))
        return out

    def path(self, src_ip: str, dst_ip: str,
             next_ports: dict[int, dict[str, int]] | None = None) -> list[tuple[int, int]]:
        """[(dpid, out_port), ...] a packet from ``src_ip`` to ``dst_ip`` takes; [] when
        either host is not located yet or the fabric does not connect them."""
        src, dst = self.hosts.get(src_ip), self.hosts.get(dst_ip)
        if src is None or dst is None:
            return []
        table = self.next_ports() if next_ports is None else next_ports
        hops, dpid, seen = [], src.dpid, set()
        while dpid not in seen:
            seen.add(dpid)
            port = table.get(dpid, {}).get(dst_ip)
            if port is None:
                return []
            hops.append((dpid, port))
            if dpid == dst.dpid:
                return hops
            peer = self.links.get((dpid, port))
            if peer is None:
                return []
            dpid = peer[0]
        return []   # a loop: cannot happen with BFS next hops, kept as a guard
