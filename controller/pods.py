"""A controller per pod (docs/design.md, "A controller per pod"): which switches and hosts
one controller owns, and the prefix routes that join the pods through the core layer.
Pure: the topology in, plain data out; the service applies it (controller/reconcile.py,
controller/fabric_events.py).

Who owns what. A pod is a Liquid ``domain`` of the topology. A rack's ToR belongs to the
rack's pod; a switch of role ``core`` belongs to the core layer; any other switch (agg,
spine) belongs to the one pod whose switches it links to (found outwards from the
ToRs), and a non-core switch linking two pods is an error: with a controller per pod
there is no one to own it (give it role ``core``). Each pod's own switches must join
all its racks without the core (its traffic inside the pod never leaves it).

How pods reach each other. Each controller routes its own hosts as one controller does
for the whole fabric, and every other pod's hosts by *prefix*: the smallest IPv4 prefix
holding all of a pod's hosts (or, where that prefix would take in another pod's host,
the exact set of prefixes covering its addresses), towards the pod's *exits*: for a pod
controller, its core neighbours; for the core controller, the destination pod's switches
next to the core. Hosts keep one flat subnet (as on one controller), so a pod
controller answers a host's ARP for another pod's host with :data:`GATEWAY_MAC`, and
the destination pod's ToR writes the host's real MAC back before delivering the packet
(the anycast-gateway of routed fabrics). No ARP crosses the core.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import networkx as nx

from controller import rules as R
from sluice_common.errors import InputError, option_error
from topologies import Topology

CORE = "core"                    # the scope of the controller that owns the core layer
GATEWAY_MAC = "02:73:6c:75:69:63"   # locally administered: what other pods' hosts are "at"
PRIO_PREFIX = 90                 # below a pod's own per-host routes (PRIO_FORWARD)
COOKIE_PREFIX = 0x4


@dataclass(frozen=True)
class RemotePrefix:
    """Another pod's addresses, as seen from one scope: its prefix, the IPs of its hosts
    (ARP answers) and the foreign switches its traffic leaves through."""
    pod: str
    prefix: str                  # "10.2.0.0/29"
    ips: frozenset[str]
    exits: frozenset[str]        # switch names (not owned) next to an owned switch


@dataclass(frozen=True)
class PodScope:
    name: str                    # a pod (domain) of the topology, or CORE
    owned: frozenset[str]        # switch names this controller manages
    remote: tuple[RemotePrefix, ...]

    def remote_ips(self) -> dict[str, RemotePrefix]:
        return {ip: p for p in self.remote for ip in p.ips}


def switch_pods(topology: Topology) -> dict[str, str | None]:
    """Switch name -> its pod, or None for the core layer (see the module doc)."""
    src = topology.source
    owner: dict[str, str | None] = {s.name: None for s in topology.switches
                                    if s.role == "core"}
    for rack in topology.racks:
        if owner.setdefault(rack.tor, rack.domain) != rack.domain:
            raise InputError(src, f"ToR {rack.tor} holds racks of pods {owner[rack.tor]} and "
                             f"{rack.domain}", element=f"rack {rack.name}")
    neighbours = {s.name: set() for s in topology.switches}
    for link in topology.links:
        neighbours[link.a].add(link.b)
        neighbours[link.b].add(link.a)
    frontier = [n for n, pod in owner.items() if pod is not None]
    while frontier:         # outwards from the ToRs: each switch takes its neighbours' pod
        nxt = []
        for name in frontier:
            for n in sorted(neighbours[name]):
                if n not in owner:
                    owner[n] = owner[name]
                    nxt.append(n)
                elif owner[n] is not None and owner[n] != owner[name]:
                    raise InputError(src, f"links pods {owner[n]} and {owner[name]}: with a "
                                     "controller per pod a switch shared by pods must have "
                                     "role core", element=f"switch {n}")
        frontier = nxt
    for s in topology.switches:
        owner.setdefault(s.name, None)    # reaches no ToR but through the core: core
    for pod in sorted({r.domain for r in topology.racks}):
        mine = [n for n, p in owner.items() if p == pod]
        if not nx.is_connected(topology.graph.subgraph(mine)):
            raise InputError(src, f"pod {pod}'s own switches do not join all its racks "
                             "without the core layer", element=f"pod {pod}")
    return owner


def pod_prefixes(topology: Topology) -> dict[str, list[str]]:
    """Pod -> the prefixes its hosts' addresses are routed by from elsewhere."""
    ips: dict[str, list[ipaddress.IPv4Address]] = {}
    for h in topology.hosts:
        ips.setdefault(topology.domain_of(h.name), []).append(ipaddress.IPv4Address(h.ip))
    out = {}
    for pod, mine in sorted(ips.items()):
        others = [ip for p, theirs in ips.items() if p != pod for ip in theirs]
        lo, hi = min(mine), max(mine)
        span = next(ipaddress.summarize_address_range(lo, lo))
        while hi not in span:
            span = span.supernet()
        if any(ip in span for ip in others):       # exact: one prefix per aligned block
            nets = ipaddress.collapse_addresses(ipaddress.IPv4Network(ip) for ip in mine)
            out[pod] = [str(n) for n in nets]
        else:
            out[pod] = [str(span)]
    return out


def pod_scope(topology: Topology, pod: str) -> PodScope:
    """The scope of the controller of ``pod`` (a domain of ``topology``, or CORE)."""
    owner = switch_pods(topology)
    pods = sorted({r.domain for r in topology.racks})
    if pod != CORE and pod not in pods:
        raise option_error("pod", f"{topology.source} has no pod {pod!r} (its pods: "
                           f"{', '.join(pods)}; or {CORE} for the core layer)")
    if pod == CORE and CORE in pods:
        raise option_error("pod", f"{topology.source} names a pod {CORE!r}, which is "
                           "the core layer's scope; rename that domain")
    mine = None if pod == CORE else pod
    owned = frozenset(n for n, p in owner.items() if p == mine)
    if not owned:
        raise option_error("pod", f"{topology.source} has no switch of role core")
    ips_of = {p: frozenset(h.ip for h in topology.hosts if topology.domain_of(h.name) == p)
              for p in pods}
    neighbours = {n for link in topology.links for a, n in ((link.a, link.b), (link.b, link.a))
                  if a in owned and n not in owned}
    remote = []
    for other, prefixes in pod_prefixes(topology).items():
        if other == mine:
            continue
        exits = frozenset(n for n in neighbours if owner[n] == other) or \
            frozenset(n for n in neighbours if owner[n] is None)
        remote += [RemotePrefix(other, p, ips_of[other], exits) for p in prefixes]
    return PodScope(pod, owned, tuple(remote))


def scoped_topology(topology: Topology, scope: PodScope) -> Topology:
    """What the scope's controller is told: its switches and their foreign neighbours
    (named, so that LLDP finds the links to them), its pod's racks and hosts, and the
    links with at least one owned end."""
    links = tuple(link for link in topology.links
                  if link.a in scope.owned or link.b in scope.owned)
    named = scope.owned | {n for link in links for n in (link.a, link.b)}
    racks = tuple(r for r in topology.racks if r.domain == scope.name)
    rack_names = {r.name for r in racks}
    return Topology(f"{topology.name}/{scope.name}",
                    tuple(s for s in topology.switches if s.name in named), racks,
                    tuple(h for h in topology.hosts if h.rack in rack_names), links,
                    topology.emulation_bw_scale, topology.source)


def prefix_next_ports(scope: PodScope, dpid_of: dict[str, int],
                      links: dict[tuple[int, int], tuple[int, int]]
                      ) -> dict[int, dict[str, int]]:
    """Owned dpid -> {prefix: out port}: for every other pod's prefix, the next hop on a
    shortest path to one of its exits through owned switches (``links``: the learned
    (dpid, port) -> (peer dpid, peer port)). Equal next hops are chosen by prefix, so
    different pods leave by different uplinks, deterministically."""
    owned = {dpid_of[n] for n in scope.owned}
    port_to = {(a, b): pa for (a, pa), (b, _pb) in links.items()}
    out: dict[int, dict[str, int]] = {}
    for remote in scope.remote:
        exits = {dpid_of[n] for n in remote.exits}
        g = nx.Graph()
        g.add_edges_from((a, b) for (a, b) in port_to
                         if a in owned and (b in owned or b in exits))
        starts = [e for e in exits if e in g]
        if not starts:
            continue
        dist = nx.multi_source_dijkstra_path_length(g, starts)
        salt = int(ipaddress.IPv4Network(remote.prefix).network_address)
        for s in sorted(d for d in dist if d in owned):
            closer = sorted(n for n in g.neighbors(s) if dist.get(n, -1) == dist[s] - 1)
            if closer:
                out.setdefault(s, {})[remote.prefix] = port_to[(s, closer[salt % len(closer)])]
    return out


def prefix_match(prefix: str) -> tuple[tuple[str, object], ...]:
    net = ipaddress.IPv4Network(prefix)
    return R.make_match(eth_type=R.ETH_IPV4,
                        ipv4_dst=(str(net.network_address), str(net.netmask)))


def prefix_rules(next_ports: dict[int, dict[str, int]]) -> list[R.Rule]:
    """One table-1 rule per switch and remote prefix (below the per-host routes)."""
    return [R.Rule(dpid, PRIO_PREFIX, prefix_match(prefix), (("output", port),),
                   COOKIE_PREFIX, R.TABLE_FORWARD)
            for dpid, table in sorted(next_ports.items()) for prefix, port in sorted(table.items())]


def delivering(rules: list[R.Rule], hosts: dict[str, tuple[int, str]]) -> list[R.Rule]:
    """``rules`` (per-host forwarding) with the host's own MAC written into the frames at
    the switch it sits behind (``hosts``: ip -> (its dpid, its MAC)): frames from another
    pod arrive addressed to :data:`GATEWAY_MAC`."""
    out = []
    for r in rules:
        here = hosts.get(dict(r.match).get("ipv4_dst"))
        if here is not None and here[0] == r.dpid:
            r = R.Rule(r.dpid, r.priority, r.match, (("set_eth_dst", here[1]),) + r.actions,
                       r.cookie, r.table)
        out.append(r)
    return out


def leaves_by(next_ports: dict[int, dict[str, int]],
              links: dict[tuple[int, int], tuple[int, int]], dpid: int, prefix: str,
              exits: set[int]) -> bool:
    """Whether the prefix routes (``next_ports``, from :func:`prefix_next_ports`) take a
    packet from switch ``dpid`` to one of ``exits`` (dpids) for ``prefix``: an ARP answer
    for a host there is then usable."""
    seen = set()
    while dpid not in seen:
        seen.add(dpid)
        port = next_ports.get(dpid, {}).get(prefix)
        peer = links.get((dpid, port)) if port is not None else None
        if peer is None:
            return False
        if peer[0] in exits:
            return True          # the next scope's routes take it on
        dpid = peer[0]
    return False                 # a loop: cannot happen with shortest-path next hops


__all__ = ["CORE", "GATEWAY_MAC", "PodScope", "RemotePrefix", "switch_pods", "pod_prefixes", "pod_scope", "scoped_topology",
           "prefix_next_ports", "prefix_rules", "delivering", "leaves_by"]
