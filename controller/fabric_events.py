"""What the switches tell the controller (the os-ken app's events): switches up and
down, links (LLDP) and hosts (ARP) found, port counters; and proxy ARP.

Each event updates the fabric view under the shared lock and reconciles; a link or host
found is saved at once, so that a restarted controller routes without rediscovery.

Proxy ARP answers only once the switches hold the routes the answer invites traffic on:
a path both ways between asker and target through connected switches, and every route
change sent so far confirmed by the switches' barrier replies. Unknown IPv4 is dropped
(controller/rules.py), so an answer sent while a route was still in flight cost the
asker's first packet: a `ping -c1` in a fresh fabric lost it under CPU load.
"""

from __future__ import annotations

import itertools
import logging
from typing import Callable, NamedTuple

from controller import pods
from controller import rules as R
from controller.packets import ArpIn, arp_probe, arp_reply
from controller.persistence import StateStore
from controller.reconcile import Reconciler
from controller.settling import Settling
from controller.state import Shared

ARP_REQUEST = 1
# Route changes unconfirmed for this long (a switch that went away before its barrier
# reply) no longer hold proxy-ARP answers back: the answer is the host's only way in.
ROUTES_ACK_TIMEOUT_S = 2.0
MAX_ASKS_PER_TARGET = 64

LOG = logging.getLogger("sluice.controller")


class ArpAsk(NamedTuple):
    """A host's ARP request the controller has not answered yet."""
    dpid: int
    port: int
    mac: str
    ip: str


class FabricEvents:
    def __init__(self, shared: Shared, reconciler: Reconciler, settling: Settling,
                 store: StateStore) -> None:
        self.s, self.reconciler, self.settling, self.store = shared, reconciler, settling, store
        # What keeps state per switch, forgotten when the switch goes (FAUCET-style: the
        # managers of one event, looped over)
        self._per_switch = (settling, reconciler, shared.linkstats)
        # target ip -> asks waiting for the target to be located and routed
        self._pending_arp: dict[str, list[ArpAsk]] = {}
        # route changes sent and not yet confirmed: token -> when sent (clock)
        self._unconfirmed: dict[int, float] = {}
        self._tokens = itertools.count()
        # a controller per pod: other pods' host IPs (answered with the gateway MAC)
        scope = shared.config.scope
        self._remote = {} if scope is None else scope.remote_ips()

    def switch_up(self, dpid: int, ports: dict[int, str],
                  table: list[R.Rule] | None = None) -> None:
        """A switch connected. ``table``: the rules it holds (read back with a flow-stats
        request); only the difference is sent. Without it the switch is cleared first."""
        self.switches_up([(dpid, ports, table)])

    def switches_up(self, switches: list[tuple[int, dict[int, str], list[R.Rule] | None]],
                    alive: Callable[[int], bool] = lambda dpid: True) -> None:
        """Switches that connected together, each as :meth:`switch_up`, then one
        reconcile for all (see :meth:`switches_changed`)."""
        self.switches_changed([("up", dpid, ports, table) for dpid, ports, table in switches],
                              alive)

    def switches_changed(self, changes: list[tuple[str, int, dict[int, str] | None,
                                                   list[R.Rule] | None]],
                         alive: Callable[[int], bool] = lambda dpid: True) -> None:
        """Switches that came up ``("up", dpid, ports, table)``, as :meth:`switch_up`, or
        went down ``("down", dpid, None, None)``, as :meth:`switch_down`, in this order,
        then one reconcile for all: a fabric coming up (or a burst of connections
        dropping) costs one reconcile per burst, not one per switch (each of which
        recomputes the routes). ``alive(dpid)``, asked under the shared lock for a switch
        that came up: whether that connection is still the switch's (one that went down
        meanwhile is skipped)."""
        s = self.s
        with s.lock:
            clears, changed = [], 0
            for kind, dpid, ports, table in changes:
                if kind == "down":
                    s.fabric.switch_down(dpid)
                    for manager in self._per_switch:
                        manager.forget_switch(dpid)
                    changed += 1
                    continue
                if not s.fabric.owns(dpid):
                    LOG.warning("switch dpid %016x is not %s; ignoring it", dpid,
                                "in the topology" if s.config.scope is None else
                                f"one of {s.config.scope.name}'s switches")
                    continue
                if not alive(dpid):
                    continue
                # A reconnect keeps what LLDP/ARP found (only links/hosts on vanished
                # ports are dropped) so the full table goes back at once instead of after
                # rediscovery.
                s.fabric.prune_ports(dpid, ports)
                self.reconciler.forget_switch(dpid)
                s.fabric.connected.add(dpid)
                changed += 1
                if table is None:
                    clears.append(R.FlowMod("clear", R.Rule(dpid, 0, (), (), 0)))
                    continue
                s.installed.apply(R.FlowMod("add", r) for r in table if r.dpid == dpid)
                self.settling.start(dpid)
            if changed:
                self._reconcile_routes(prefix=clears or None)

    def tick(self) -> None:
        """Periodic: once a reconnected switch's settling time is over, delete what it
        still holds that the controller does not want."""
        with self.s.lock:
            if self.settling.expire():
                self.reconciler.full()
            now = self.s.clock()
            late = [t for t, sent in self._unconfirmed.items() if now - sent > ROUTES_ACK_TIMEOUT_S]
            if late:
                LOG.warning("%d route change(s) unconfirmed after %.0f s; answering ARP anyway",
                            len(late), ROUTES_ACK_TIMEOUT_S)
                for t in late:
                    del self._unconfirmed[t]
                self._answer_ready()

    def update_ports(self, dpid: int, ports: dict[int, str]) -> None:
        """The port list of a connected switch changed: drop links/hosts on lost ports."""
        with self.s.lock:
            self.s.fabric.prune_ports(dpid, ports)
            self.reconciler.fabric_dirty = True
            self._reconcile_routes()

    def switch_down(self, dpid: int) -> None:
        self.switches_changed([("down", dpid, None, None)])

    def link_seen(self, src: tuple[int, int], dst: tuple[int, int]) -> None:
        s = self.s
        with s.lock:
            if s.fabric.add_link(src, dst):
                LOG.info("link %s:%d <-> %s:%d", s.switch_name(src[0]), src[1],
                         s.switch_name(dst[0]), dst[1])
                self.reconciler.fabric_dirty = True
                self._reconcile_routes()
                self.store.save()   # a restart then routes at once (no rediscovery wait)

    def host_seen(self, ip: str, dpid: int, port: int, mac: str) -> bool:
        s = self.s
        with s.lock:
            if s.fabric.learn_host(ip, dpid, port, mac):
                LOG.info("host %s (%s) at %s port %d", ip, mac, s.switch_name(dpid), port)
                self.reconciler.fabric_dirty = True
                self._reconcile_routes()
                self.store.save()
                return True
            return False

    def host_mac(self, ip: str) -> str | None:
        with self.s.lock:
            loc = self.s.fabric.hosts.get(ip)
            return loc.mac if loc else None

    def on_arp(self, dpid: int, in_port: int, a: ArpIn) -> None:
        """Proxy ARP: learn the sender; probe for an unknown target out of its ToR's edge
        ports; answer the asker (through the sink's packet-outs) once the target is located
        and routed both ways, and the switches confirmed the routes. Nothing is flooded."""
        if a.from_controller:
            return             # our own probe came back through a switch link
        s = self.s
        with s.lock:
            s.metrics.inc("sluice_arp_packets_total")
            if a.src_ip not in s.known_ips:
                return
            self.host_seen(a.src_ip, dpid, in_port, a.src_mac)
            here = s.fabric.hosts.get(a.src_ip)
            # Only a host where it was learned is answered: admission passes its IPv4 only
            # from there (a misplaced or spoofed asker would get an answer it cannot use).
            if a.opcode == ARP_REQUEST and here is not None and (here.dpid, here.port) == \
                    (dpid, in_port) and a.dst_ip != a.src_ip and \
                    (a.dst_ip in s.known_ips or a.dst_ip in self._remote):
                pending = self._pending_arp.setdefault(a.dst_ip, [])
                ask = ArpAsk(dpid, in_port, a.src_mac, a.src_ip)
                if ask not in pending and len(pending) < MAX_ASKS_PER_TARGET:
                    pending.append(ask)
                if a.dst_ip not in s.fabric.hosts and a.dst_ip not in self._remote:
                    s.sink.packet_out(self.probes_for(a.dst_ip))
            # Now when nothing is in flight; else when the switches confirm (a host just
            # learned sent its routes)
            self._answer_ready()

    def _reconcile_routes(self, prefix: list[R.FlowMod] | None = None) -> None:
        """Reconcile after a fabric change; ARP answers wait for the barrier replies."""
        token = next(self._tokens)
        self._unconfirmed[token] = self.s.clock()
        self.reconciler.full(prefix=prefix, on_done=lambda: self._routes_confirmed(token))

    def _routes_confirmed(self, token: int) -> None:
        # from the barrier reply's thread, or at once (no switch touched, TableSink)
        with self.s.lock:
            self._unconfirmed.pop(token, None)
            self._answer_ready()

    def _answer_ready(self) -> None:
        """Answer every waiting ask whose target is located and routed both ways through
        connected switches, unless route changes are still unconfirmed."""
        s = self.s
        if self._unconfirmed or self.reconciler.fabric_dirty or \
                not any(t in s.fabric.hosts or t in self._remote for t in self._pending_arp):
            return    # (a dirty fabric is reconciled next, and answers then)

        def routed(src: str, dst: str) -> bool:
            hops = self.reconciler.hops(src, dst)      # the routes the switches hold
            return bool(hops) and all(d in s.fabric.connected for d, _ in hops)

        outs = []
        for target, asks in list(self._pending_arp.items()):
            if target in self._remote:
                outs += self._answer_remote(target, asks)
                continue
            here = s.fabric.hosts.get(target)
            if here is None:
                continue
            left = [ask for ask in asks if not (routed(ask.ip, target) and routed(target, ask.ip))]
            outs += [(ask.dpid, ask.port, arp_reply(here.mac, target, ask.mac, ask.ip))
                     for ask in asks if ask not in left]
            if left:
                self._pending_arp[target] = left
            else:
                del self._pending_arp[target]
        if outs:
            s.sink.packet_out(outs)

    def _answer_remote(self, target: str, asks: list[ArpAsk]) -> list[tuple[int, int, bytes]]:
        """Asks for another pod's host: answered with the gateway MAC once the asker's
        switch routes that pod's prefix out of this scope through connected switches."""
        f, remote = self.s.fabric, self._remote[target]
        ports = {d: t for d, t in self.reconciler.prefix_ports.items() if d in f.connected}
        exits = {f.dpid_of_name[n] for n in remote.exits}
        ready = [a for a in asks
                 if pods.leaves_by(ports, f.links, a.dpid, remote.prefix, exits)]
        left = [a for a in asks if a not in ready]
        if left:
            self._pending_arp[target] = left
        else:
            del self._pending_arp[target]
        return [(a.dpid, a.port, arp_reply(pods.GATEWAY_MAC, target, a.mac, a.ip))
                for a in ready]

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
