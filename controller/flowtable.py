"""A flow table in memory: applies :class:`~controller.rules.FlowMod` s like a switch.

The controller keeps one as its shadow of what it installed (so it can diff and list
rules per job), and the tests use it as a fake switch: apply the flow mods, then look
up a packet's fields and follow the output port.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Iterable

from controller.rules import FlowMod, Rule


class FlowTable:
    def __init__(self) -> None:
        self.rules: dict[tuple, Rule] = {}

    def apply(self, mods: Iterable[FlowMod]) -> None:
        for mod in mods:
            if mod.command == "delete":
                self.rules.pop(mod.rule.key, None)
            elif mod.command == "modify":
                old = self.rules.get(mod.rule.key)
                if old is not None:   # OpenFlow 1.3 MODIFY_STRICT keeps the cookie
                    self.rules[mod.rule.key] = Rule(old.dpid, old.priority, old.match,
                                                    mod.rule.actions, old.cookie, old.table)
            elif mod.command == "clear":    # delete every rule of the switch
                for key in [k for k, r in self.rules.items() if r.dpid == mod.rule.dpid]:
                    del self.rules[key]
            elif mod.command == "add":
                self.rules[mod.rule.key] = mod.rule
            else:
                raise ValueError(f"unknown flow-mod command {mod.command!r}")

    def of_switch(self, dpid: int) -> dict[tuple, Rule]:
        return {k: r for k, r in self.rules.items() if r.dpid == dpid}

    def with_cookie(self, cookie: int) -> list[Rule]:
        return [r for r in self.rules.values() if r.cookie == cookie]

    def lookup(self, dpid: int, packet: dict[str, Any], table: int = 0) -> Rule | None:
        """Highest-priority rule of table ``table`` of switch ``dpid`` whose match fields
        all equal the packet's (``packet`` uses OFPMatch names: in_port, eth_type, ...)."""
        best = None
        for r in self.rules.values():
            if r.dpid != dpid or r.table != table:
                continue
            if all(_field_eq(packet.get(f), v) for f, v in r.match):
                if best is None or r.priority > best.priority:
                    best = r
        return best


    def process(self, dpid: int, packet: dict[str, Any]) -> tuple[str, Any]:
        """Run ``packet`` through switch ``dpid``'s pipeline from table 0, applying
        set_dscp to ``packet['ip_dscp']``. Returns ("output", port) | ("controller", None)
        | ("drop", None)."""
        table = 0
        while True:
            rule = self.lookup(dpid, packet, table)
            if rule is None or not rule.actions:
                return "drop", None
            goto = None
            for act in rule.actions:
                if act[0] == "set_dscp":
                    packet["ip_dscp"] = act[1]
                elif act[0] == "set_eth_dst":
                    packet["eth_dst"] = act[1]
                elif act[0] == "output":
                    return "output", act[1]
                elif act[0] == "controller":
                    return "controller", None
                elif act[0] == "goto":
                    goto = act[1]
            if goto is None or goto <= table:
                return "drop", None
            table = goto


def _field_eq(have: Any, want: Any) -> bool:
    if have is None:
        return False
    if isinstance(want, tuple):      # (address, mask): a prefix
        try:
            net = ipaddress.IPv4Network("/".join(want))
            return ipaddress.IPv4Address(have) in net
        except ValueError:
            return False
    if isinstance(want, str) and "." in want:
        try:
            return ipaddress.ip_address(have) == ipaddress.ip_address(want)
        except ValueError:
            return False
    return have == want
