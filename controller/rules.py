"""Flow rules as plain data, and the diff that turns a desired table into flow mods.

Nothing here knows os-ken: a :class:`Rule` is (switch, priority, match, actions, cookie);
the app converts it to ``OFPFlowMod`` at the last moment. Keeping rules as data lets the
whole controller be tested against :class:`controller.flowtable.FlowTable` with no switch,
and lets the app send only the rules that really changed (no flow-mod storm per batch).

Actions are tuples: ``("output", port)``, ``("controller",)``, ``("set_dscp", dscp)``,
``("set_queue", queue_id)``. A rule with no actions drops.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Callable, Iterable, Mapping

from controller.ranking import FlowKey
from topologies.priority_classes import dscp_of_level, queue_id_of_level

ETH_IPV4, ETH_ARP, ETH_LLDP = 0x0800, 0x0806, 0x88CC
IPPROTO_TCP = 6

# Priorities: control traffic > PS flows > plain forwarding > table-miss (drop).
PRIO_CONTROL = 1000
PRIO_JOB_FLOW = 200
PRIO_FORWARD = 100
PRIO_MISS = 0

COOKIE_BASE = 0x1        # table-miss, ARP/LLDP to controller
COOKIE_FORWARDING = 0x2  # per-destination IPv4 forwarding
ENFORCE_MODES = ("dscp", "queue")


@dataclass(frozen=True)
class Rule:
    dpid: int
    priority: int
    match: tuple[tuple[str, Any], ...]     # sorted (field, value) pairs, OFPMatch names
    actions: tuple[tuple, ...]
    cookie: int

    @cached_property
    def key(self) -> tuple:
        """What identifies a flow entry in OpenFlow (strict match): switch, priority, match."""
        return (self.dpid, self.priority, self.match)

    def match_dict(self) -> dict[str, Any]:
        return dict(self.match)

    def to_json(self) -> dict[str, Any]:
        return {"dpid": self.dpid, "priority": self.priority, "match": dict(self.match),
                "actions": [list(a) for a in self.actions], "cookie": f"0x{self.cookie:x}"}


@dataclass(frozen=True)
class FlowMod:
    command: str   # "add" | "modify" | "delete" | "clear" (all rules of rule.dpid)
    rule: Rule


def make_match(**fields: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(fields.items()))


def base_rules(dpid: int) -> list[Rule]:
    """Every switch: ARP and LLDP go to the controller (proxy ARP, link discovery; never
    flooded, so loops in leaf-spine/fat-tree cannot storm), everything unknown is dropped."""
    return [
        Rule(dpid, PRIO_MISS, (), (), COOKIE_BASE),
        Rule(dpid, PRIO_CONTROL, make_match(eth_type=ETH_ARP), (("controller",),), COOKIE_BASE),
        Rule(dpid, PRIO_CONTROL, make_match(eth_type=ETH_LLDP), (("controller",),), COOKIE_BASE),
    ]


def forwarding_rules(next_ports: Mapping[int, Mapping[str, int]]) -> list[Rule]:
    """``next_ports[dpid][dst_ip] = out_port`` -> one IPv4 rule per switch and destination."""
    return [Rule(dpid, PRIO_FORWARD, make_match(eth_type=ETH_IPV4, ipv4_dst=ip),
                 (("output", port),), COOKIE_FORWARDING)
            for dpid, table in sorted(next_ports.items()) for ip, port in sorted(table.items())]


@lru_cache(maxsize=65536)
def flow_match(flow: FlowKey) -> tuple[tuple[str, Any], ...]:
    return make_match(eth_type=ETH_IPV4, ip_proto=IPPROTO_TCP, ipv4_src=flow.src_ip,
                      ipv4_dst=flow.dst_ip, tcp_dst=flow.dst_port)


def job_flow_rules(flow: FlowKey, level: int, hops: list[tuple[int, int]], cookie: int,
                   enforce: str) -> list[Rule]:
    """Rules that give ``flow`` priority ``level`` along ``hops`` [(dpid, out_port), ...].

    dscp: mark once at the ingress switch; the DSCP travels with the packet and every
    egress port's HTB/u32 filter classifies on it (set_queue is ignored by the userspace
    datapath, DESIGN.md). queue: every switch on the path sets its own egress queue."""
    if not hops:
        return []
    match = flow_match(flow)
    if enforce == "dscp":
        dpid, port = hops[0]
        return [Rule(dpid, PRIO_JOB_FLOW, match,
                     (("set_dscp", dscp_of_level(level)), ("output", port)), cookie)]
    if enforce == "queue":
        return [Rule(dpid, PRIO_JOB_FLOW, match,
                     (("set_queue", queue_id_of_level(level)), ("output", port)), cookie)
                for dpid, port in hops]
    raise ValueError(f"enforce must be one of {ENFORCE_MODES}, got {enforce!r}")


def diff(installed: Mapping[tuple, Rule], desired: Iterable[Rule],
         keep: Callable[[Rule], bool] | None = None) -> list[FlowMod]:
    """Flow mods turning ``installed`` (key -> rule) into ``desired``. Unchanged rules
    produce nothing; a rule whose actions changed is modified in place (counters kept);
    a rule whose cookie changed is re-added (MODIFY does not change cookies). Unwanted
    rules for which ``keep(rule)`` is true are not deleted (yet)."""
    want = {r.key: r for r in desired}
    mods = [FlowMod("delete", r) for k, r in installed.items()
            if k not in want and not (keep and keep(r))]
    for k, r in want.items():
        old = installed.get(k)
        if old is None or old.cookie != r.cookie:
            mods.append(FlowMod("add", r))
        elif old.actions != r.actions:
            mods.append(FlowMod("modify", r))
    return mods
