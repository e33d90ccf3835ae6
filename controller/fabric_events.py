"""What the switches tell the controller (the os-ken app's events): switches up and
down, links (LLDP) and hosts (ARP) found, port counters; and proxy ARP.

Each event updates the fabric view under the shared lock and reconciles; a link or host
found is saved at once, so that a restarted controller routes without rediscovery.
"""

from __future__ import annotations

import logging

from controller import rules as R
from controller.packets import ArpIn, arp_probe, arp_reply
from controller.persistence import StateStore
from controller.reconcile import Reconciler
from controller.settling import Settling
from controller.state import Shared

ARP_REQUEST = 1

LOG = logging.getLogger("sluice.controller")


class FabricEvents:
    def __init__(self, shared: Shared, reconciler: Reconciler, settling: Settling,
                 store: StateStore) -> None:
        self.s, self.reconciler, self.settling, self.store = shared, reconciler, settling, store
        # What keeps state per switch, forgotten when the switch goes (FAUCET-style: the
        # managers of one event, looped over)
        self._per_switch = (settling, reconciler, shared.linkstats)
        # target ip -> [(dpid, port, asker mac, asker ip)] waiting for the target's reply
        self._pending_arp: dict[str, list[tuple[int, int, str, str]]] = {}

    def switch_up(self, dpid: int, ports: dict[int, str],
                  table: list[R.Rule] | None = None) -> None:
        """A switch connected. ``table``: the rules it holds (read back with a flow-stats
        request); only the difference is sent. Without it the switch is cleared first."""
        s = self.s
        with s.lock:
            if dpid not in s.fabric.name_of_dpid:
                LOG.warning("switch dpid %016x is not in the topology; ignoring it", dpid)
                return
            # A reconnect keeps what LLDP/ARP found (only links/hosts on vanished ports
            # are dropped) so the full table goes back at once instead of after rediscovery.
            s.fabric.prune_ports(dpid, ports)
            self.reconciler.forget_switch(dpid)
            s.fabric.connected.add(dpid)
            if table is None:
                clear = R.FlowMod("clear", R.Rule(dpid, 0, (), (), 0))
                self.reconciler.full(prefix=[clear])
                return
            s.installed.apply(R.FlowMod("add", r) for r in table if r.dpid == dpid)
            self.settling.start(dpid)
            self.reconciler.full()

    def tick(self) -> None:
        """Periodic: once a reconnected switch's settling time is over, delete what it
        still holds that the controller does not want."""
        with self.s.lock:
            if self.settling.expire():
                self.reconciler.full()

    def update_ports(self, dpid: int, ports: dict[int, str]) -> None:
        """The port list of a connected switch changed: drop links/hosts on lost ports."""
        with self.s.lock:
            self.s.fabric.prune_ports(dpid, ports)
            self.reconciler.fabric_dirty = True
            self.reconciler.full()

    def switch_down(self, dpid: int) -> None:
        s = self.s
        with s.lock:
            s.fabric.switch_down(dpid)
            for manager in self._per_switch:
                manager.forget_switch(dpid)
            self.reconciler.full()

    def link_seen(self, src: tuple[int, int], dst: tuple[int, int]) -> None:
        s = self.s
        with s.lock:
            if s.fabric.add_link(src, dst):
                LOG.info("link %s:%d <-> %s:%d", s.switch_name(src[0]), src[1],
                         s.switch_name(dst[0]), dst[1])
                self.reconciler.fabric_dirty = True
                self.reconciler.full()
                self.store.save()   # a restart then routes at once (no rediscovery wait)

    def host_seen(self, ip: str, dpid: int, port: int, mac: str) -> bool:
        s = self.s
        with s.lock:
            if s.fabric.learn_host(ip, dpid, port, mac):
                LOG.info("host %s (%s) at %s port %d", ip, mac, s.switch_name(dpid), port)
                self.reconciler.fabric_dirty = True
                self.reconciler.full()
                self.store.save()
                return True
            return False

    def host_mac(self, ip: str) -> str | None:
        with self.s.lock:
            loc = self.s.fabric.hosts.get(ip)
            return loc.mac if loc else None

    def on_arp(self, dpid: int, in_port: int, a: ArpIn) -> list[tuple[int, int, bytes]]:
        """Proxy ARP. Returns packet-outs (dpid, port, frame): the answer to the asker when
        the target is located, else ARP probes towards the target (the asker is answered
        as soon as the target replies). Nothing is ever flooded."""
        if a.from_controller:
            return []          # our own probe came back through a switch link
        s, outs = self.s, []
        with s.lock:
            s.metrics.inc("sluice_arp_packets_total")
            if a.src_ip in s.known_ips:
                self.host_seen(a.src_ip, dpid, in_port, a.src_mac)
                here = s.fabric.hosts.get(a.src_ip)
                if here is not None and (here.dpid, here.port) == (dpid, in_port):
                    for ask in self._pending_arp.pop(a.src_ip, []):
                        outs.append((ask[0], ask[1], arp_reply(here.mac, a.src_ip, ask[2], ask[3])))
            if a.opcode != ARP_REQUEST or a.src_ip not in s.known_ips \
                    or a.dst_ip not in s.known_ips or a.dst_ip == a.src_ip:
                return outs
            target = s.fabric.hosts.get(a.dst_ip)
            if target is not None:
                outs.append((dpid, in_port, arp_reply(target.mac, a.dst_ip, a.src_mac, a.src_ip)))
                return outs
            pending = self._pending_arp.setdefault(a.dst_ip, [])
            ask = (dpid, in_port, a.src_mac, a.src_ip)
            if ask not in pending and len(pending) < 64:
                pending.append(ask)
            outs += self.probes_for(a.dst_ip)
        return outs

    def probes_for(self, ip: str) -> list[tuple[int, int, bytes]]:
        """ARP probes for ``ip`` out of its ToR's edge ports (never a switch link)."""
        s = self.s
        with s.lock:
            tor = s.fabric.tor_dpid_of_ip.get(ip)
            if tor not in s.fabric.connected:
                return []
            frame = arp_probe(ip)
            return [(tor, p, frame) for p in s.fabric.edge_ports(tor)]

    def unlocated_hosts(self) -> list[tuple[str, int]]:
        """(ip, ToR dpid) of described hosts not located yet, whose ToR is connected."""
        f = self.s.fabric
        with self.s.lock:
            return [(ip, tor) for ip, tor in sorted(f.tor_dpid_of_ip.items())
                    if ip not in f.hosts and tor in f.connected]

    def port_stats(self, dpid: int, stats: list[tuple[int, float, int, int]]) -> None:
        with self.s.lock:
            for port, t, tx, rx in stats:
                self.s.linkstats.update(dpid, port, t, tx, rx)
