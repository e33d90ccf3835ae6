"""Turn a :class:`~topologies.model.Topology` into a Mininet ``Topo``.

Everything the fabric and the controller must agree on is decided here by plain
functions, so the controller can know port numbers, MACs and interface names without
importing Mininet:

- switch dpids come from the description (Mininet would otherwise derive them from the
  digits in the name, and ``tor1``/``spine1`` would both get dpid 1);
- host IPs come from the description, with a /8 prefix; host MACs are ``02:00:`` + the
  four bytes of the IP (locally administered, unique because IPs are);
- OpenFlow port numbers are fixed: on every switch, first its hosts (in description
  order), then its switch links (in description order). Interface names follow Mininet's
  ``<node>-eth<port>``; a host has the single interface ``<host>-eth0``.

Links are plain (no TCLink): the fabric harness (``mininet_fabric/fabric.py``) puts its
own HTB tree on every interface, rated ``bw * topology.emulation_bw_scale`` Mbit/s, because
the priority classes must live in the same HTB tree that enforces the link rate.

``mininet`` is imported lazily, inside :func:`build_mininet_topo`, so the rest of
``topologies/`` stays importable without it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from sluice_common.errors import InputError
from topologies.model import Topology

IFNAMSIZ = 15          # Linux interface names are at most 15 characters
MAX_EMULATED_NODES = 128  # hosts + switches; beyond this the userspace datapath drowns here


@dataclass(frozen=True)
class EmulatedLink:
    """One Mininet link: ``a``'s port ``port_a`` <-> ``b``'s port ``port_b``."""
    a: str
    port_a: int
    b: str
    port_b: int
    bw_mbit: float  # emulated rate, already scaled

    @property
    def intf_a(self) -> str:
        return f"{self.a}-eth{self.port_a}"

    @property
    def intf_b(self) -> str:
        return f"{self.b}-eth{self.port_b}"


def mac_of(ip: str) -> str:
    """Host MAC for a host IP: ``02:00:`` + the IP's four bytes."""
    packed = ipaddress.IPv4Address(ip).packed
    return "02:00:" + ":".join(f"{b:02x}" for b in packed)


def dpid_hex(dpid: int) -> str:
    """Mininet/OVS datapath id string (16 hex digits)."""
    return f"{dpid:016x}"


def emulated_links(topology: Topology) -> list[EmulatedLink]:
    """All links with their fixed port numbers and emulated rates (Mbit/s)."""
    scale = topology.emulation_bw_scale
    next_port = {s.name: 1 for s in topology.switches}
    out: list[EmulatedLink] = []
    for h in topology.hosts:
        tor = topology.rack_by_name[h.rack].tor
        out.append(EmulatedLink(h.name, 0, tor, next_port[tor], h.bw * scale))
        next_port[tor] += 1
    for link in topology.links:
        pa, pb = next_port[link.a], next_port[link.b]
        next_port[link.a] += 1
        next_port[link.b] += 1
        out.append(EmulatedLink(link.a, pa, link.b, pb, link.bw * scale))
    return out


def port_map(topology: Topology) -> dict[str, dict[str, int]]:
    """``{switch: {neighbour: port}}``: the OpenFlow port on ``switch`` facing ``neighbour``."""
    ports: dict[str, dict[str, int]] = {s.name: {} for s in topology.switches}
    for link in emulated_links(topology):
        if link.a in ports:
            ports[link.a][link.b] = link.port_a
        ports[link.b][link.a] = link.port_b
    return ports


def check_emulatable(topology: Topology) -> None:
    """Raise InputError when Mininet cannot build this topology here."""
    nodes = len(topology.hosts) + len(topology.switches)
    if nodes > MAX_EMULATED_NODES:
        raise InputError(topology.source, f"{nodes} hosts+switches is too big to emulate with "
                         f"Mininet on this machine (limit {MAX_EMULATED_NODES}); use it in the "
                         "simulator only", element=f"topology '{topology.name}'")
    for link in emulated_links(topology):
        for intf in (link.intf_a, link.intf_b):
            if len(intf) > IFNAMSIZ:
                node = intf.rsplit("-eth", 1)[0]
                raise InputError(topology.source, f"name too long for a Linux interface "
                                 f"('{intf}' > {IFNAMSIZ} characters)", element=f"'{node}'",
                                 field="name")


def build_mininet_topo(topology: Topology):
    """A ``mininet.topo.Topo`` with the description's switches, hosts and links."""
    from mininet.topo import Topo  # lazy: only the fabric needs Mininet

    check_emulatable(topology)
    topo = Topo()
    for s in topology.switches:
        topo.addSwitch(s.name, dpid=dpid_hex(s.dpid))
    for h in topology.hosts:
        topo.addHost(h.name, ip=f"{h.ip}/8", mac=mac_of(h.ip))
    for link in emulated_links(topology):
        topo.addLink(link.a, link.b, port1=link.port_a, port2=link.port_b)
    return topo
