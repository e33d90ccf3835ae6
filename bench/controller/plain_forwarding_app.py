"""Reference for bench_controller.py: a plain forwarding-only os-ken app (L2 learning
switch, OpenFlow 1.3) with the smallest possible HTTP trigger, so that the sluice
controller's figures can be compared with what bare os-ken does on the same switches.

    POST /flowmods {"n": N, "dscp": D}  -> N flow mods (one per tcp_dst 20000+i, set DSCP D,
                                           output NORMAL... here: port 1) on every switch,
                                           then a barrier; answers after the barrier replies
                                           with {"latency_ms": ...}
    POST /flowmods {"n": N, "delete": true}  -> the same N rules deleted

Run: python -m bench.controller.plain_forwarding_app --ofp-port 6654 --api 127.0.0.1:8099
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

APP = None


def send_rules(dp, n: int, dscp: int, delete: bool) -> None:
    """The N rules (tcp_dst 20000+i: set DSCP, out port 1) to one switch, or their
    deletes."""
    p, o = dp.ofproto_parser, dp.ofproto
    for i in range(n):
        match = p.OFPMatch(eth_type=0x800, ip_proto=6, tcp_dst=20000 + i)
        if delete:
            dp.send_msg(p.OFPFlowMod(dp, command=o.OFPFC_DELETE_STRICT, priority=200,
                                     match=match, out_port=o.OFPP_ANY, out_group=o.OFPG_ANY))
        else:
            acts = [p.OFPActionSetField(ip_dscp=dscp), p.OFPActionOutput(1)]
            inst = [p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, acts)]
            dp.send_msg(p.OFPFlowMod(dp, priority=200, match=match, instructions=inst))


def make_app_class():
    from os_ken.base import app_manager
    from os_ken.controller import ofp_event
    from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
    from os_ken.lib.packet import ethernet, packet
    from os_ken.ofproto import ofproto_v1_3

    class PlainForwarding(app_manager.OSKenApp):
        OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            global APP
            APP = self
            self.mac_to_port: dict[int, dict[str, int]] = {}
            self.datapaths = {}
            self.lock = threading.Lock()
            self.waiting: dict[tuple[int, int], threading.Event] = {}

        @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
        def features(self, ev):
            dp = ev.msg.datapath
            p, o = dp.ofproto_parser, dp.ofproto
            self.datapaths[dp.id] = dp
            inst = [p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS,
                                            [p.OFPActionOutput(o.OFPP_CONTROLLER,
                                                               o.OFPCML_NO_BUFFER)])]
            with self.lock:
                dp.send_msg(p.OFPFlowMod(dp, priority=0, match=p.OFPMatch(), instructions=inst))

        @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
        def packet_in(self, ev):
            msg = ev.msg
            dp = msg.datapath
            p, o = dp.ofproto_parser, dp.ofproto
            in_port = msg.match["in_port"]
            eth = packet.Packet(msg.data).get_protocol(ethernet.ethernet)
            if eth is None or eth.ethertype == 0x88CC:
                return
            table = self.mac_to_port.setdefault(dp.id, {})
            table[eth.src] = in_port
            out = table.get(eth.dst, o.OFPP_FLOOD)
            actions = [p.OFPActionOutput(out)]
            with self.lock:
                if out != o.OFPP_FLOOD:
                    inst = [p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, actions)]
                    dp.send_msg(p.OFPFlowMod(dp, priority=1, instructions=inst,
                                             match=p.OFPMatch(in_port=in_port, eth_dst=eth.dst)))
                data = msg.data if msg.buffer_id == o.OFP_NO_BUFFER else None
                dp.send_msg(p.OFPPacketOut(dp, buffer_id=msg.buffer_id, in_port=in_port,
                                           actions=actions, data=data))

        @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
        def barrier(self, ev):
            event = self.waiting.pop((ev.msg.datapath.id, ev.msg.xid), None)
            if event:
                event.set()

        def flowmods(self, n: int, dscp: int, delete: bool) -> float:
            t0 = time.monotonic()
            events = []
            with self.lock:
                for dp in self.datapaths.values():
                    send_rules(dp, n, dscp, delete)
                    barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
                    dp.set_xid(barrier)
                    event = threading.Event()
                    self.waiting[(dp.id, barrier.xid)] = event
                    events.append(event)
                    dp.send_msg(barrier)
            for event in events:
                event.wait(30)
            return time.monotonic() - t0

    return PlainForwarding


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._answer(200, {"ok": APP is not None, "switches": len(APP.datapaths) if APP else 0})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        seconds = APP.flowmods(int(body.get("n", 1)), int(body.get("dscp", 0)),
                               bool(body.get("delete")))
        self._answer(200, {"latency_ms": seconds * 1000})

    def _answer(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ofp-port", type=int, default=6654)
    ap.add_argument("--api", default="127.0.0.1:8099")
    args = ap.parse_args()
    # app_manager first: importing os_ken.controller.controller on its own is a circular
    # import in os-ken 4.2.2; it still registers the ofp listen options we need.
    from os_ken.base import app_manager
    importlib.import_module("os_ken.controller.controller")
    from os_ken import cfg
    cfg.CONF(args=["--ofp-tcp-listen-port", str(args.ofp_port), "--ofp-listen-host",
                   "127.0.0.1"], project="os_ken")
    host, port = args.api.rsplit(":", 1)
    httpd = ThreadingHTTPServer((host, int(port)), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: os._exit(0))
    sys.modules[__name__].PlainForwarding = make_app_class()
    app_manager.AppManager.run_apps([__name__])
    return 0


if __name__ == "__main__":
    sys.exit(main())
