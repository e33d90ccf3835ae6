"""The topology description: one object for the scheduler, the simulator and Mininet.

A topology is racks of GPU hosts under top-of-rack (ToR) switches, joined by
aggregation/spine/core switches. The YAML format (see ``topologies/builtin/*.yaml``)::

    name: two-rack
    domains: {}                  # optional: domain -> list of racks (default: one domain)
    switches:
      - {name: tor1, role: tor}          # role: tor | agg | spine | core
      - {name: spine1, role: spine}
    racks:
      - {name: rack1, tor: tor1}         # optional 'domain: pod1'
    hosts:
      - {name: h1, rack: rack1, gpus: 4, bw: 100}   # bw: host<->ToR link, Mbit/s
      # optional intra_bw: Mbit/s of the host's own bus for gradient exchange between a
      # PS and workers on that host (default DEFAULT_INTRA_BW_MBPS, below)
    links:
      - {a: tor1, b: spine1, bw: 100}               # switch<->switch links, Mbit/s

Hosts link to their rack's ToR implicitly. Optional per-element fields: ``dpid`` for
switches (default: position + 1), ``ip`` for hosts (default ``10.0.0.<position+1>``).
Oversubscription is what the bandwidths say it is (``oversubscription()`` reports it).

Everything here is pure: no Mininet, no I/O beyond reading the YAML file.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx
import yaml

from sluice.errors import InputError, raise_all

from topologies.schema import SWITCH_ROLES  # noqa: F401 (re-exported)

# A host's in-host exchange bandwidth (Mbit/s) when its YAML gives no ``intra_bw``:
# PCIe 3.0 x16 class. PCIe 3.0 x16 carries 15.75 GB/s per direction in theory (PCI-SIG
# spec, 8 GT/s x 16 lanes, 128b/130b coding) and about 12 GB/s in practice, ~100 Gbit/s;
# that is the bus of the P100-era hosts the default profile describes. Shared, like any
# link, by the job's PS<->worker flows on the host. Measured on an H100 host (PCIe 5.0):
# gradients device->host plus parameters host->device ran at 300-430 Gbit/s
# (job_scheduler/data/measured_runs_h100.json); NVLink-class hosts are faster still.
DEFAULT_INTRA_BW_MBPS = 100_000.0


@dataclass(frozen=True)
class Switch:
    name: str
    role: str
    dpid: int


@dataclass(frozen=True)
class Rack:
    name: str
    tor: str
    domain: str


@dataclass(frozen=True)
class Host:
    name: str
    rack: str
    gpus: int
    bw: float  # Mbit/s of the host <-> ToR link
    ip: str
    intra_bw: float = DEFAULT_INTRA_BW_MBPS  # Mbit/s of the in-host exchange bus


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    bw: float  # Mbit/s


@dataclass(frozen=True)
class Topology:
    name: str
    switches: tuple[Switch, ...]
    racks: tuple[Rack, ...]
    hosts: tuple[Host, ...]
    links: tuple[Link, ...]   # switch <-> switch only; host links are implicit
    # Mininet's userspace datapath cannot carry 10 Gbit/s: the emulated fabric runs every
    # link at bw * emulation_bw_scale Mbit/s, keeping the ratios (oversubscription) intact.
    emulation_bw_scale: float = 1.0
    source: str = field(default="<built-in>", compare=False)

    # ---- lookups -------------------------------------------------------------------
    @cached_property
    def host_by_name(self) -> dict[str, Host]:
        return {h.name: h for h in self.hosts}

    @cached_property
    def rack_by_name(self) -> dict[str, Rack]:
        return {r.name: r for r in self.racks}

    @cached_property
    def switch_by_name(self) -> dict[str, Switch]:
        return {s.name: s for s in self.switches}

    @cached_property
    def hosts_by_rack(self) -> dict[str, tuple[Host, ...]]:
        out: dict[str, list[Host]] = {r.name: [] for r in self.racks}
        for h in self.hosts:
            out[h.rack].append(h)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def hosts_by_domain(self) -> dict[str, tuple[Host, ...]]:
        out: dict[str, list[Host]] = {}
        for h in self.hosts:
            out.setdefault(self.rack_by_name[h.rack].domain, []).append(h)
        return {k: tuple(v) for k, v in out.items()}

    @property
    def total_gpus(self) -> int:
        return sum(h.gpus for h in self.hosts)

    def rack_of(self, host: str) -> str:
        return self.host_by_name[host].rack

    def domain_of(self, host: str) -> str:
        return self.rack_by_name[self.rack_of(host)].domain

    def all_links(self) -> list[Link]:
        """Switch links plus the implicit host <-> ToR links."""
        host_links = [Link(h.name, self.rack_by_name[h.rack].tor, h.bw) for h in self.hosts]
        return host_links + list(self.links)

    # ---- graph -----------------------------------------------------------------------
    @cached_property
    def graph(self) -> nx.Graph:
        """Undirected graph: nodes carry ``kind`` ('host'|'switch') and, for hosts,
        ``rack``, ``domain``, ``gpus``, ``ip``; for switches ``role`` and ``dpid``.
        Edges carry ``bw`` in Mbit/s."""
        g = nx.Graph(name=self.name)
        for s in self.switches:
            g.add_node(s.name, kind="switch", role=s.role, dpid=s.dpid)
        for h in self.hosts:
            g.add_node(h.name, kind="host", rack=h.rack, domain=self.rack_by_name[h.rack].domain,
                       gpus=h.gpus, ip=h.ip)
        for link in self.all_links():
            g.add_edge(link.a, link.b, bw=float(link.bw))
        return g

    def path(self, a: str, b: str) -> list[str]:
        """One deterministic shortest path (hop count) from node ``a`` to node ``b``."""
        return nx.shortest_path(self.graph, a, b)

    def path_bandwidth(self, a: str, b: str) -> float:
        """Bottleneck bandwidth (Mbit/s) of the path from ``a`` to ``b``; inf for a == b."""
        if a == b:
            return float("inf")
        p = self.path(a, b)
        return min(self.graph.edges[u, v]["bw"] for u, v in zip(p, p[1:]))

    def oversubscription(self) -> dict[str, float]:
        """Per rack: total host bandwidth / total ToR uplink bandwidth."""
        out = {}
        for rack in self.racks:
            down = sum(h.bw for h in self.hosts_by_rack[rack.name])
            up = sum(l.bw for l in self.links if rack.tor in (l.a, l.b))
            out[rack.name] = down / up if up else float("inf")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "emulation": {"bw_scale": self.emulation_bw_scale},
            "switches": [{"name": s.name, "role": s.role, "dpid": s.dpid} for s in self.switches],
            "racks": [{"name": r.name, "tor": r.tor, "domain": r.domain} for r in self.racks],
            "hosts": [{"name": h.name, "rack": h.rack, "gpus": h.gpus, "bw": h.bw, "ip": h.ip,
                       "intra_bw": h.intra_bw} for h in self.hosts],
            "links": [{"a": l.a, "b": l.b, "bw": l.bw} for l in self.links],
        }


# ---- parsing and validation ------------------------------------------------------------
# The checks live in the typed model (schema.py), which reports every problem at once.


def parse_topology(data: Any, source: str = "<topology>") -> Topology:
    """Validate a decoded YAML document and build a :class:`Topology`.

    Raises :class:`InputError` (:class:`InputErrors` for several) naming the element for:
    unknown fields, missing fields, duplicate names, zero/negative bandwidth or GPU counts,
    a host whose rack does not exist, a rack whose ToR is not a switch, a dangling link,
    a disconnected fabric.
    """
    if not isinstance(data, dict):
        raise InputError(source, "a topology must be a YAML mapping")
    unknown = sorted(set(data) - _ALLOWED["top"])
    if unknown:
        raise InputError(source, "unknown top-level field", field=unknown[0])
    name = _require(source, "topology", data, "name", str)

    switches: list[Switch] = []
    for i, raw in enumerate(data.get("switches") or []):
        label, raw = _fields(source, "switch", i, raw)
        sname = _require(source, label, raw, "name", str)
        role = raw.get("role", "tor")
        if role not in SWITCH_ROLES:
            raise InputError(source, f"must be one of {', '.join(SWITCH_ROLES)}", element=label,
                             field="role")
        dpid = raw.get("dpid", i + 1)
        if isinstance(dpid, bool) or not isinstance(dpid, int) or dpid <= 0:
            raise InputError(source, f"must be a positive integer, got {dpid!r}", element=label,
                             field="dpid")
        switches.append(Switch(sname, role, dpid))
    _no_duplicates(source, "switch", [s.name for s in switches])
    _no_duplicates(source, "switch dpid", [str(s.dpid) for s in switches])
    switch_names = {s.name for s in switches}

    domain_of_rack: dict[str, str] = {}
    for dom, racks in (data.get("domains") or {}).items():
        for r in racks or []:
            domain_of_rack[str(r)] = str(dom)

    racks: list[Rack] = []
    for i, raw in enumerate(data.get("racks") or []):
        label, raw = _fields(source, "rack", i, raw)
        rname = _require(source, label, raw, "name", str)
        tor = _require(source, label, raw, "tor", str)
        if tor not in switch_names:
            raise InputError(source, f"ToR switch '{tor}' is not declared in switches",
                             element=label, field="tor")
        domain = str(raw.get("domain", domain_of_rack.get(rname, "cluster")))
        racks.append(Rack(rname, tor, domain))
    _no_duplicates(source, "rack", [r.name for r in racks])
    rack_names = {r.name for r in racks}

    hosts: list[Host] = []
    for i, raw in enumerate(data.get("hosts") or []):
        label, raw = _fields(source, "host", i, raw)
        hname = _require(source, label, raw, "name", str)
        if "rack" not in raw:
            raise InputError(source, "host has no rack", element=label, field="rack")
        rack = _require(source, label, raw, "rack", str)
        if rack not in rack_names:
            raise InputError(source, f"rack '{rack}' is not declared in racks", element=label,
                             field="rack")
        gpus = _require(source, label, raw, "gpus", int)
        if gpus < 0:
            raise InputError(source, f"must be >= 0, got {gpus}", element=label, field="gpus")
        bw = _positive(source, label, raw, "bw")
        ip = raw.get("ip", str(ipaddress.IPv4Address("10.0.0.0") + i + 1))
        try:
            ipaddress.IPv4Address(ip)
        except ValueError:
            raise InputError(source, f"not an IPv4 address: {ip!r}", element=label, field="ip")
        intra_bw = (_positive(source, label, raw, "intra_bw") if "intra_bw" in raw
                    else DEFAULT_INTRA_BW_MBPS)
        hosts.append(Host(hname, rack, gpus, bw, ip, intra_bw))
    if not hosts:
        raise InputError(source, "a topology needs at least one host", field="hosts")
    _no_duplicates(source, "host/switch", [h.name for h in hosts] + [s.name for s in switches])
    _no_duplicates(source, "host ip", [h.ip for h in hosts])

    links: list[Link] = []
    for i, raw in enumerate(data.get("links") or []):
        label, raw = _fields(source, "link", i, raw)
        a = _require(source, label, raw, "a", str)
        b = _require(source, label, raw, "b", str)
        label = f"link {a}-{b}"
        for end in (a, b):
            if end not in switch_names:
                raise InputError(source, f"dangling link: '{end}' is not a declared switch "
                                 "(hosts link to their rack's ToR implicitly)", element=label)
        if a == b:
            raise InputError(source, "a link must join two different switches", element=label)
        links.append(Link(a, b, _positive(source, label, raw, "bw")))
    _no_duplicates(source, "link", ["-".join(sorted((l.a, l.b))) for l in links])

    emulation = data.get("emulation") or {}
    if not isinstance(emulation, dict) or set(emulation) - {"bw_scale"}:
        raise InputError(source, "emulation takes only 'bw_scale'", field="emulation")
    scale = emulation.get("bw_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise InputError(source, f"must be a number > 0, got {scale!r}", element="emulation",
                         field="bw_scale")
    topo = Topology(name, tuple(switches), tuple(racks), tuple(hosts), tuple(links),
                    float(scale), source)
    if not nx.is_connected(topo.graph):
        parts = sorted(sorted(c) for c in nx.connected_components(topo.graph))
        raise InputError(source, f"the fabric is not connected; '{parts[-1][0]}' is cut off")
    return topo


def load_topology_file(path: str | Path) -> Topology:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise InputError(str(path), f"cannot read: {err.strerror}")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(str(path), f"not valid YAML: {err}")
    return parse_topology(data, str(path))
