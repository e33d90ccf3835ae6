"""Packets the controller sends and receives (pure, os-ken ``lib.packet``).

- LLDP for link discovery (os-ken's own ``LLDPPacket`` format: chassis ``dpid:<hex>``,
  port id = 4-byte port number).
- ARP: the controller answers every ARP request itself from what it learned (proxy ARP
  by packet-out on the asking port), so ARP is never flooded; to locate a host it has not
  heard from, it sends an ARP probe (sender IP 0.0.0.0, RFC 5227) out of the host's ToR
  edge ports, and the host's reply comes back as a packet-in.

``classify`` turns raw packet-in bytes into a small tagged tuple; anything it cannot
parse is reported as malformed (the app counts it) instead of raising.
"""

from __future__ import annotations

from dataclasses import dataclass

from os_ken.lib.packet import arp, ethernet, ether_types, packet
from os_ken.topology.switches import LLDPPacket

CONTROLLER_MAC = "02:51:00:00:00:fe"   # locally administered; source of probes
BROADCAST = "ff:ff:ff:ff:ff:ff"
PROBE_IP = "0.0.0.0"


def lldp_frame(dpid: int, port: int, port_mac: str) -> bytes:
    return LLDPPacket.lldp_packet(dpid, port, port_mac, 120)


def arp_reply(target_mac: str, target_ip: str, asker_mac: str, asker_ip: str) -> bytes:
    """'target_ip is at target_mac', addressed to the host that asked."""
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst=asker_mac, src=target_mac,
                                       ethertype=ether_types.ETH_TYPE_ARP))
    pkt.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=target_mac, src_ip=target_ip,
                             dst_mac=asker_mac, dst_ip=asker_ip))
    pkt.serialize()
    return bytes(pkt.data)


def arp_probe(target_ip: str) -> bytes:
    """Who has target_ip? (sender 0.0.0.0: the host answers without caching us)."""
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst=BROADCAST, src=CONTROLLER_MAC,
                                       ethertype=ether_types.ETH_TYPE_ARP))
    pkt.add_protocol(arp.arp(opcode=arp.ARP_REQUEST, src_mac=CONTROLLER_MAC, src_ip=PROBE_IP,
                             dst_mac="00:00:00:00:00:00", dst_ip=target_ip))
    pkt.serialize()
    return bytes(pkt.data)


@dataclass(frozen=True)
class LldpIn:
    src_dpid: int
    src_port: int


@dataclass(frozen=True)
class ArpIn:
    opcode: int          # arp.ARP_REQUEST or arp.ARP_REPLY
    src_mac: str
    src_ip: str
    dst_ip: str

    @property
    def from_controller(self) -> bool:
        return self.src_mac.lower() == CONTROLLER_MAC


@dataclass(frozen=True)
class Other:
    ethertype: int


@dataclass(frozen=True)
class Malformed:
    reason: str


def classify(data: bytes) -> LldpIn | ArpIn | Other | Malformed:
    try:
        pkt = packet.Packet(bytes(data))
        eth = pkt.get_protocol(ethernet.ethernet)
        if eth is None:
            return Malformed("no Ethernet header")
        if eth.ethertype == ether_types.ETH_TYPE_LLDP:
            try:
                dpid, port = LLDPPacket.lldp_parse(bytes(data))
            except Exception as err:  # os-ken raises several types for bad TLVs
                return Malformed(f"bad LLDP: {err.__class__.__name__}")
            return LldpIn(dpid, port)
        if eth.ethertype == ether_types.ETH_TYPE_ARP:
            a = pkt.get_protocol(arp.arp)
            if a is None or a.opcode not in (arp.ARP_REQUEST, arp.ARP_REPLY):
                return Malformed("truncated or unknown ARP")
            return ArpIn(a.opcode, a.src_mac, a.src_ip, a.dst_ip)
        return Other(eth.ethertype)
    except Exception as err:   # a fuzzed frame must never take the controller down
        return Malformed(f"unparseable: {err.__class__.__name__}")
