"""A stand-in OpenFlow 1.3 controller for checking the fabric's ``--controller`` path.

It only installs one table-miss rule per switch, ``actions=NORMAL`` (OVS's own L2
learning), so it is good for loop-free topologies only. The real controller lives in
``controller/``; this exists so the harness can test RemoteController + secure fail mode
+ waiting for connections without depending on it.

    python -m mininet_tests.normal_controller --port 16653
"""

from __future__ import annotations

import argparse
import importlib

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3


class NormalForwarding(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_switch_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        actions = [parser.OFPActionOutput(ofp.OFPP_NORMAL)]
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=0, match=parser.OFPMatch(),
                                      instructions=inst))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6653)
    args = ap.parse_args()
    from os_ken import cfg
    importlib.import_module("os_ken.controller.controller")   # registers the ofp listen options

    cfg.CONF(args=["--ofp-listen-host", args.host, "--ofp-tcp-listen-port", str(args.port)],
             project="os_ken")
    app_manager.AppManager.run_apps([__name__ if __name__ != "__main__"
                                     else "mininet_tests.normal_controller"])


if __name__ == "__main__":
    main()
