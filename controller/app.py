"""The os-ken (Ryu API) OpenFlow 1.3 app: a thin shell around ControllerService.

It turns OpenFlow events into service calls and the service's rule data into
``OFPFlowMod``/``OFPPacketOut``. No decisions are made here.

Threads (os-ken 4.2.2, native hub, measured): one thread accepts switches, each switch
connection has a receive thread (which also runs os-ken's own handshake handlers), a send
thread and an echo thread; this app's handlers run in its own event thread. The HTTP API
runs in further threads. So ``send`` can be called from HTTP threads and the event
thread at once: a lock keeps xid assignment and per-switch message order consistent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER,
                                       set_ev_cls)
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

from controller import packets
from controller.ofwire import fast_match
from controller.rules import FlowMod, Rule

LOG = logging.getLogger("sluice.controller.app")
SYNC_TIMEOUT_S = 2.0   # no flow-stats reply by then: clear the switch and reinstall
SERVICE_CONTEXT = "sluice_service"          # controller.service.ControllerService
STATS_INTERVAL_CONTEXT = "stats_interval"   # seconds between port-stats polls (and ARP probes)


class SluiceController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # os-ken hands every app it instantiates the contexts as keyword arguments (the
        # mechanism behind _CONTEXTS); `sluice controller` adds the configured service
        # (controller.cli.run_os_ken), so no module global carries it.
        if SERVICE_CONTEXT not in kwargs:
            raise RuntimeError(f"no '{SERVICE_CONTEXT}' context (start via `sluice controller`)")
        self.service = kwargs[SERVICE_CONTEXT]
        self.stats_interval = float(kwargs.get(STATS_INTERVAL_CONTEXT, 1.0))
        self.service.sink = self
        self.datapaths: dict[int, object] = {}
        self.port_macs: dict[int, dict[int, str]] = {}
        self.send_lock = threading.Lock()
        self.barriers: dict[tuple[int, int], dict] = {}
        self.syncing: dict[int, dict] = {}   # dpid -> switch whose table is being read
        self.stopping = threading.Event()
        # switches whose table was read back, waiting to join (see _finish_sync)
        self._joining: list[tuple] = []
        self._joining_lock, self._join_wake = threading.Lock(), threading.Event()
        self._poller = hub.spawn(self._poll_loop)
        self._joiner = hub.spawn(self._join_loop)

    # ------------------------------------------------------------ switch lifecycle --
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        dp = ev.msg.datapath
        req = dp.ofproto_parser.OFPPortDescStatsRequest(dp, 0)
        with self.send_lock:
            dp.send_msg(req)

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _port_desc(self, ev):
        dp = ev.msg.datapath
        ofp = dp.ofproto
        # A port whose link is down (or that is administratively down) counts as gone:
        # the service forgets links and hosts on it and routes around it.
        ports = {p.port_no: _text(p.name) for p in ev.msg.body if p.port_no <= ofp.OFPP_MAX
                 and not p.state & ofp.OFPPS_LINK_DOWN and not p.config & ofp.OFPPC_PORT_DOWN}
        self.port_macs[dp.id] = {p.port_no: p.hw_addr for p in ev.msg.body
                                 if p.port_no <= ofp.OFPP_MAX}
        if self.datapaths.get(dp.id) is dp:      # a port came or went on a known switch
            self.service.update_ports(dp.id, ports)
        else:
            # Read the switch's table back before telling the service: it then sends
            # only the difference instead of clearing a table that is still forwarding.
            self.datapaths[dp.id] = dp
            LOG.info("switch %016x up with %d ports; reading its flow table", dp.id,
                     len(ports))
            self.syncing[dp.id] = {"dp": dp, "ports": ports, "rules": [],
                                   "since": time.monotonic()}
            req = dp.ofproto_parser.OFPFlowStatsRequest(dp)
            with self.send_lock:
                dp.send_msg(req)
        self._send_lldp(dp)
        self.packet_out(self.service_probes(dp.id))

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        # A port came or went: ask for the full description again (idempotent re-sync).
        self._features(ev)

    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev):
        dp = ev.datapath
        if ev.state == DEAD_DISPATCHER and dp.id is not None and \
                self.datapaths.get(dp.id) is dp:
            LOG.info("switch %016x down", dp.id)
            del self.datapaths[dp.id]
            # in order with the switches joining, in the joiner's next reconcile (a burst
            # of dropped connections then costs one reconcile, not one each)
            with self._joining_lock:
                self._joining.append(("down", dp.id, None, None, dp))
            self._join_wake.set()

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _flow_stats(self, ev):
        dp = ev.msg.datapath
        sync = self.syncing.get(dp.id)
        if sync is None or sync["dp"] is not dp:
            return
        sync["rules"] += [rule_of_stats(dp, st) for st in ev.msg.body]
        if not ev.msg.flags & dp.ofproto.OFPMPF_REPLY_MORE:
            self._finish_sync(dp.id, sync["rules"])

    def _finish_sync(self, dpid: int, table) -> None:
        sync = self.syncing.pop(dpid, None)
        if sync is None or self.datapaths.get(dpid) is not sync["dp"]:
            return
        LOG.info("switch %016x: %s", dpid, "no flow-stats reply, clearing it"
                 if table is None else f"{len(table)} rules read back, reconciling")
        # Handed to the joiner thread: switches that connect while a reconcile runs join
        # together in the next one (a fabric of 136 switches came up one full reconcile
        # per switch, each slower than the last, and missed echoes made it start over).
        with self._joining_lock:
            self._joining.append(("up", dpid, sync["ports"], table, sync["dp"]))
        self._join_wake.set()

    def _join_loop(self) -> None:
        """Hands the switches that finished their sync or went down to the service, all
        that are waiting in one call, in order; a connection that went down meanwhile
        is skipped."""
        while not self.stopping.is_set():
            self._join_wake.wait(1.0)
            self._join_wake.clear()
            with self._joining_lock:
                batch, self._joining = self._joining, []
            if not batch:
                continue
            conn = {dpid: dp for kind, dpid, _ports, _table, dp in batch if kind == "up"}
            try:
                self.service.switches_changed(
                    [change[:4] for change in batch],
                    alive=lambda dpid: self.datapaths.get(dpid) is conn[dpid])
            except Exception:   # keep joining whatever one switch did
                LOG.exception("switches up or down")

    # ------------------------------------------------------------ packet-in --
    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        in_port = msg.match.get("in_port")
        self.service.metrics.inc("sluice_packet_in_total")
        pkt = packets.classify(msg.data)
        if isinstance(pkt, packets.LldpIn):
            self.service.link_seen((pkt.src_dpid, pkt.src_port), (dp.id, in_port))
        elif isinstance(pkt, packets.ArpIn):
            self.service.on_arp(dp.id, in_port, pkt)    # answers through packet_out
        elif isinstance(pkt, packets.Malformed):
            self.service.metrics.inc("sluice_malformed_packets_total")
            LOG.debug("malformed packet-in from %016x port %s: %s", dp.id, in_port, pkt.reason)

    # ------------------------------------------------------------ replies --
    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev):
        group = self.barriers.pop((ev.msg.datapath.id, ev.msg.xid), None)
        if group is not None:
            self._barrier_done(group)

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def _port_stats(self, ev):
        dp = ev.msg.datapath
        stats = [(s.port_no, s.duration_sec + s.duration_nsec * 1e-9, s.tx_bytes, s.rx_bytes)
                 for s in ev.msg.body if s.port_no <= dp.ofproto.OFPP_MAX]
        self.service.port_stats(dp.id, stats)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        msg = ev.msg
        self.service.metrics.inc("sluice_openflow_errors_total")
        LOG.warning("OpenFlow error from %016x: type=%d code=%d", msg.datapath.id or 0,
                    msg.type, msg.code)

    # ------------------------------------------------------------ sink (service -> switches) --
    def send(self, mods: list[FlowMod], on_done=None) -> None:
        by_dp: dict[int, list[FlowMod]] = defaultdict(list)
        for m in mods:
            by_dp[m.rule.dpid].append(m)
        live = {d: ms for d, ms in by_dp.items() if d in self.datapaths}
        if not live:
            if on_done:
                on_done()
            return
        group = {"left": len(live), "on_done": on_done, "lock": threading.Lock()}
        with self.send_lock:
            for dpid, ms in live.items():
                dp = self.datapaths[dpid]
                for m in ms:
                    dp.send_msg(to_ofp(dp, m))
                barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
                dp.set_xid(barrier)
                self.barriers[(dpid, barrier.xid)] = group
                dp.send_msg(barrier)

    def _barrier_done(self, group: dict) -> None:
        with group["lock"]:
            group["left"] -= 1
            last = group["left"] == 0
        if last and group["on_done"]:
            group["on_done"]()

    def packet_out(self, outs) -> None:
        """The sink's packet-outs: (dpid, port, frame) each, out of that switch port."""
        with self.send_lock:
            for dpid, port, data in outs:
                dp = self.datapaths.get(dpid)
                if dp is None:
                    continue
                parser, ofp = dp.ofproto_parser, dp.ofproto
                dp.send_msg(parser.OFPPacketOut(
                    datapath=dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                    actions=[parser.OFPActionOutput(port)], data=data))

    def _send_lldp(self, dp) -> None:
        outs = [(dp.id, port, packets.lldp_frame(dp.id, port, mac))
                for port, mac in sorted(self.port_macs.get(dp.id, {}).items())]
        self.packet_out(outs)

    def service_probes(self, dpid: int):
        return [o for ip, tor in self.service.unlocated_hosts() if tor == dpid
                for o in self.service.probes_for(ip)]

    # ------------------------------------------------------------ periodic work --
    def _poll_loop(self) -> None:
        """Port stats every interval; LLDP every interval until every described link is
        found (then every 5th); ARP probes for hosts not located yet."""
        tick = 0
        while not self.stopping.wait(self.stats_interval):
            tick += 1
            try:
                for dpid, sync in list(self.syncing.items()):
                    if time.monotonic() - sync["since"] > SYNC_TIMEOUT_S:
                        self._finish_sync(dpid, None)
                self.service.tick()
                for dpid, dp in list(self.datapaths.items()):
                    req = dp.ofproto_parser.OFPPortStatsRequest(dp, 0, dp.ofproto.OFPP_ANY)
                    with self.send_lock:
                        dp.send_msg(req)
                fabric = self.service.fabric
                if len(fabric.links) < 2 * len(fabric.described_pairs) or tick % 5 == 0:
                    for dp in list(self.datapaths.values()):
                        self._send_lldp(dp)
                for ip, _tor in self.service.unlocated_hosts():
                    self.packet_out(self.service.probes_for(ip))
            except Exception:   # keep polling whatever one switch did
                LOG.exception("poll loop")

    def close(self):
        self.stopping.set()
        super().close()


def _text(name) -> str:
    return name.decode(errors="replace") if isinstance(name, bytes) else str(name)


def rule_of_stats(dp, st) -> Rule:
    """An OFPFlowStats entry -> rule data (the inverse of :func:`to_ofp`). Actions this
    controller never writes become ("other", text), so they differ from any wanted rule."""
    ofp = dp.ofproto
    actions, goto = [], []
    for inst in st.instructions:
        if inst.type == ofp.OFPIT_GOTO_TABLE:
            goto.append(("goto", inst.table_id))
        for act in getattr(inst, "actions", []):
            if act.cls_action_type == ofp.OFPAT_OUTPUT:
                actions.append(("controller",) if act.port == ofp.OFPP_CONTROLLER
                               else ("output", act.port))
            elif act.cls_action_type == ofp.OFPAT_SET_FIELD and act.key == "ip_dscp":
                actions.append(("set_dscp", act.value))
            elif act.cls_action_type == ofp.OFPAT_SET_FIELD and act.key == "eth_dst":
                actions.append(("set_eth_dst", act.value))
            elif act.cls_action_type == ofp.OFPAT_SET_QUEUE:
                actions.append(("set_queue", act.queue_id))
            else:
                actions.append(("other", str(act)))
    return Rule(dp.id, st.priority, tuple(sorted(st.match.items())), tuple(actions + goto),
                st.cookie, st.table_id)


def to_ofp(dp, mod: FlowMod):
    """Rule data -> OFPFlowMod for this datapath."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    if mod.command == "clear":
        return parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                 out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                                 match=parser.OFPMatch())
    rule = mod.rule
    actions = []
    for act in rule.actions:
        if act[0] == "output":
            actions.append(parser.OFPActionOutput(act[1]))
        elif act[0] == "controller":
            actions.append(parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER))
        elif act[0] == "set_dscp":
            actions.append(parser.OFPActionSetField(ip_dscp=act[1]))
        elif act[0] == "set_eth_dst":
            actions.append(parser.OFPActionSetField(eth_dst=act[1]))
        elif act[0] == "set_queue":
            actions.append(parser.OFPActionSetQueue(act[1]))
        elif act[0] != "goto":
            raise ValueError(f"unknown action {act!r}")
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)] if actions else []
    inst += [parser.OFPInstructionGotoTable(a[1]) for a in rule.actions if a[0] == "goto"]
    command = {"add": ofp.OFPFC_ADD, "modify": ofp.OFPFC_MODIFY_STRICT,
               "delete": ofp.OFPFC_DELETE_STRICT}[mod.command]
    return parser.OFPFlowMod(dp, cookie=rule.cookie, command=command, table_id=rule.table,
                             priority=rule.priority,
                             match=fast_match(rule.match), instructions=inst,
                             out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY)
