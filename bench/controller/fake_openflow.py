"""Switches that speak OpenFlow 1.3 over TCP, without a datapath: for controller
benchmarks at a scale no Mininet on this machine reaches (bench/controller/bench_scale.py).

One asyncio process holds a connection per switch of a topology, wired as Mininet wires
it (controller.fake_fabric.wiring). Each switch does what the controller needs of a real
one: the handshake (hello, features, port descriptions), echo, empty flow/port-stats
replies, a flow table kept from the flow mods it is sent (add/modify/delete, strict, and
the controller's "clear"), barrier replies once everything before them is applied (TCP
keeps the order), LLDP frames sent out of a switch port arriving as a packet-in at the
peer's port, and ARP probes for a host answered by that host. Packets are encoded with
struct from the OpenFlow 1.3 layouts, the cheapest way to keep hundreds of switches on
one core.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import Counter

from controller.fake_fabric import wiring
from topologies.mininet_topo import mac_of

OFP_VERSION = 4
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY, FEATURES_REQUEST, FEATURES_REPLY = 0, 1, 2, 3, 5, 6
PACKET_IN, PACKET_OUT, FLOW_MOD, MULTIPART_REQUEST, MULTIPART_REPLY = 10, 13, 14, 18, 19
BARRIER_REQUEST, BARRIER_REPLY = 20, 21
MP_FLOW, MP_PORT_DESC = 1, 13
FC_ADD, FC_MODIFY, FC_MODIFY_STRICT, FC_DELETE, FC_DELETE_STRICT = 0, 1, 2, 3, 4
OFPTT_ALL = 0xFF
JOB_COOKIE_TOP = 0x51            # controller.registry.Registry.COOKIE_BASE's top byte


def _msg(kind: int, xid: int, body: bytes = b"") -> bytes:
    return struct.pack("!BBHI", OFP_VERSION, kind, 8 + len(body), xid) + body


def _mac(text: str) -> bytes:
    return bytes(int(x, 16) for x in text.split(":"))


class FakeSwitch(asyncio.Protocol):
    def __init__(self, fabric: "FakeFabric", name: str, dpid: int, ports: list[int]):
        self.fabric, self.name, self.dpid, self.ports = fabric, name, dpid, ports
        self.table: dict[tuple, int] = {}        # (table, priority, match) -> cookie
        self.flow_mods = self.barriers = self.connections = 0
        self.buf = b""
        self.transport = None

    def connection_made(self, transport) -> None:
        # A (re)connected switch starts empty: it answers the controller's flow-stats
        # request with no rules, so the controller installs everything again.
        self.transport, self.buf = transport, b""
        self.table.clear()
        self.connections += 1
        transport.write(_msg(HELLO, 1))

    def connection_lost(self, exc) -> None:
        self.transport = None
        self.fabric.reconnect(self)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        at = 0
        while len(buf) - at >= 8:
            length = struct.unpack_from("!H", buf, at + 2)[0]
            if len(buf) - at < length:
                break
            self._handle(buf[at + 1], struct.unpack_from("!I", buf, at + 4)[0],
                         buf[at:at + length])
            at += length
        self.buf = buf[at:]

    def _handle(self, kind: int, xid: int, msg: bytes) -> None:
        if kind == FLOW_MOD:
            self._flow_mod(msg)
        elif kind == BARRIER_REQUEST:
            self.barriers += 1
            self.transport.write(_msg(BARRIER_REPLY, xid))
        elif kind == ECHO_REQUEST:
            self.transport.write(_msg(ECHO_REPLY, xid, msg[8:]))
        elif kind == FEATURES_REQUEST:
            self.transport.write(_msg(FEATURES_REPLY, xid,
                                      struct.pack("!QIBB2xII", self.dpid, 0, 254, 0, 0, 0)))
        elif kind == MULTIPART_REQUEST:
            mp_type = struct.unpack_from("!H", msg, 8)[0]
            body = self._port_desc() if mp_type == MP_PORT_DESC else b""
            self.transport.write(_msg(MULTIPART_REPLY, xid,
                                      struct.pack("!HH4x", mp_type, 0) + body))
        elif kind == PACKET_OUT:
            self._packet_out(msg)

    def _port_desc(self) -> bytes:
        out = b""
        for p in self.ports:
            mac = struct.pack("!HI", 0x0200 | (self.dpid & 0xFF), (self.dpid << 12) | p)
            name = f"{self.name}-eth{p}".encode()[:15]
            out += struct.pack("!I4x6s2x16sIIIIIIII", p, mac, name, 0, 0, 0, 0, 0, 0,
                               10_000_000, 10_000_000)
        return out

    def _flow_mod(self, msg: bytes) -> None:
        self.flow_mods += 1
        cookie, = struct.unpack_from("!Q", msg, 8)
        table, command = msg[24], msg[25]
        priority, = struct.unpack_from("!H", msg, 30)
        match_len, = struct.unpack_from("!H", msg, 50)
        key = (table, priority, msg[48:48 + match_len])
        if command in (FC_ADD, FC_MODIFY, FC_MODIFY_STRICT):
            self.table[key] = cookie
        elif command == FC_DELETE_STRICT:
            self.table.pop(key, None)
        elif command == FC_DELETE and table == OFPTT_ALL and match_len <= 4:
            self.table.clear()                   # the controller's "clear"

    def _packet_out(self, msg: bytes) -> None:
        actions_len, = struct.unpack_from("!H", msg, 16)
        data = msg[24 + actions_len:]
        if actions_len < 16 or len(data) < 14:
            return
        port, = struct.unpack_from("!I", msg, 28)          # the first action: output
        self.fabric.deliver(self.name, port, data)

    def packet_in(self, port: int, data: bytes) -> None:
        match = struct.pack("!HHII4x", 1, 12, 0x80000004, port)   # OXM in_port, padded
        body = struct.pack("!IHBBQ", 0xFFFFFFFF, len(data), 1, 0, 0) + match + b"\0\0" + data
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_msg(PACKET_IN, 0, body))

    def rules(self) -> tuple[int, int]:
        """(rules held, of which job rules: the controller's per-job cookies)."""
        jobs = sum(1 for c in self.table.values() if c >> 56 == JOB_COOKIE_TOP)
        return len(self.table), jobs


class FakeFabric:
    """Every switch of ``topology`` (``only``: these of them, a controller per pod's)
    connected to the controller at host:port; frames out of a port towards a switch not
    here are lost (that switch is another controller's)."""

    def __init__(self, topology, only: frozenset[str] | None = None) -> None:
        self.topology = topology
        self.wires = wiring(topology)
        self.hosts = {h.name: h for h in topology.hosts}
        self.switches: dict[str, FakeSwitch] = {}
        for s in topology.switches:
            if only is not None and s.name not in only:
                continue
            ports = sorted(p for (n, p) in self.wires if n == s.name)
            self.switches[s.name] = FakeSwitch(self, s.name, s.dpid, ports)

    async def connect(self, host: str, port: int) -> None:
        self.address = (host, port)
        loop = asyncio.get_running_loop()
        for sw in self.switches.values():
            await loop.create_connection(lambda sw=sw: sw, host, port)

    def reconnect(self, sw: FakeSwitch) -> None:
        """The controller dropped the switch (e.g. echo replies too late): a real switch
        connects again, so does this one, after a second."""
        async def again() -> None:
            await asyncio.sleep(1.0)
            try:
                await asyncio.get_running_loop().create_connection(lambda: sw, *self.address)
            except OSError:
                pass                 # the controller is gone: the bench is ending
        asyncio.ensure_future(again())

    def deliver(self, switch: str, port: int, frame: bytes) -> None:
        """A frame out of ``switch``'s ``port``: to the peer switch (LLDP), or answered
        by the host there (ARP probes)."""
        peer = self.wires.get((switch, port))
        if peer is None:
            return
        ethertype, = struct.unpack_from("!H", frame, 12)
        if peer[0] in self.switches:
            self.switches[peer[0]].packet_in(peer[1], frame)
        elif ethertype == 0x0806 and len(frame) >= 42 and peer[0] in self.hosts:
            reply = self._arp_reply(self.hosts[peer[0]], frame)
            if reply is not None:
                self.switches[switch].packet_in(port, reply)

    @staticmethod
    def _arp_reply(host, frame: bytes) -> bytes | None:
        op, = struct.unpack_from("!H", frame, 20)
        asker_mac, asker_ip, target_ip = frame[22:28], frame[28:32], frame[38:42]
        if op != 1 or target_ip != bytes(int(x) for x in host.ip.split(".")):
            return None
        mine = _mac(mac_of(host.ip))
        return (asker_mac + mine + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 2)
                + mine + target_ip + asker_mac + asker_ip)

    def stats(self) -> dict:
        roles = {s.name: s.role for s in self.topology.switches}
        per = {name: sw.rules() for name, sw in self.switches.items()}
        edge = [per[n] for n in per if roles[n] == "tor"] or [(0, 0)]
        return {"cpu_s": time.process_time(),
                "flow_mods": sum(sw.flow_mods for sw in self.switches.values()),
                "reconnects": sum(sw.connections - 1 for sw in self.switches.values()),
                "barriers": sum(sw.barriers for sw in self.switches.values()),
                "rules_total": sum(r for r, _ in per.values()),
                "rules_per_edge_switch_max": max(r for r, _ in edge),
                "job_rules_per_edge_switch_max": max(j for _, j in edge),
                "rules_per_switch_max": max(r for r, _ in per.values()),
                "roles": dict(Counter(roles.values()))}
