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

from sluice_common.errors import InputError, raise_all


# A host's in-host exchange bandwidth (Mbit/s) when its YAML gives no ``intra_bw``:
# PCIe 3.0 x16 class. PCIe 3.0 x16 carries 15.75 GB/s per direction in theory (PCI-SIG
# spec, 8 GT/s x 16 lanes, 128b/130b coding) and about 12 GB/s in practice, ~100 Gbit/s;
# that is the bus of the P100-era hosts the default profile describes. Shared, like any
# link, by the job's PS<->worker flows on the host. Measured on an H100 host (PCIe 5.0):
# gradients device->host plus parameters host->device ran at 300-430 Gbit/s
# (job_scheduler/core/data/measured_runs_h100.json); NVLink-class hosts are faster still.
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
    from topologies.schema import validate_topology_file
    parsed, errors = validate_topology_file(data, source)
    raise_all(errors)
    domain_of_rack = {str(r): str(dom) for dom, racks in parsed.domains.items()
                      for r in racks or []}
    switches = tuple(Switch(s.name, s.role, s.dpid or i + 1)
                     for i, s in enumerate(parsed.switches))
    racks = tuple(Rack(r.name, r.tor, r.domain or domain_of_rack.get(r.name, "cluster"))
                  for r in parsed.racks)
    hosts = tuple(Host(h.name, h.rack, h.gpus, float(h.bw),
                       h.ip or str(ipaddress.IPv4Address("10.0.0.0") + i + 1),
                       float(h.intra_bw) if h.intra_bw is not None else DEFAULT_INTRA_BW_MBPS)
                  for i, h in enumerate(parsed.hosts))
    links = tuple(Link(l.a, l.b, float(l.bw)) for l in parsed.links)
    scale = parsed.emulation.bw_scale if parsed.emulation else 1.0
    topo = Topology(parsed.name, switches, racks, hosts, links, float(scale), source)
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
