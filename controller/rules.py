"""Flow rules as plain data, and the diff that turns a desired table into flow mods.

Nothing here knows os-ken: a :class:`Rule` is (switch, priority, match, actions, cookie);
the app converts it to ``OFPFlowMod`` at the last moment. Keeping rules as data lets the
whole controller be tested against :class:`controller.flowtable.FlowTable` with no switch,
and lets the app send only the rules that really changed (no flow-mod storm per batch).

Actions are tuples: ``("output", port)``, ``("controller",)``, ``("set_dscp", dscp)``,
``("set_queue", queue_id)``, ``("set_eth_dst", mac)`` (controller/pods.py),
``("goto", table)`` (always last). A rule with no actions
drops.

Two tables, so that no host can buy priority (the FAUCET way: admission first):

- table 0, admission: ARP/LLDP to the controller; a packet from a host port passes only
  with the source IP bound to that port (else the table-miss drops it) and is re-marked
  to DSCP 0, the least urgent class, unless it is a registered PS flow from that port,
  which is marked with its level instead (and so are the ACKs coming back on that
  flow's connection: a flow is only as fast as its ACK clock); packets arriving on a
  switch link pass as they are (they were admitted at their first switch).
- table 1, forwarding: per-destination output (and, enforce=queue, per-hop queues of
  the PS flows).
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
# The reverse direction of a PS connection (TCP ACKs, matched on the source port): one
# below the data rules, so a packet that matches both (an ephemeral port that happens to
# equal a registered one) is classified by its data rule, deterministically.
PRIO_JOB_ACK = 199
PRIO_ADMIT = 150         # table 0: a host's own source IP on its own port
PRIO_FORWARD = 100
PRIO_TRANSIT = 100       # table 0: anything arriving on a switch-to-switch link
PRIO_MISS = 0

TABLE_ADMIT, TABLE_FORWARD = 0, 1

COOKIE_BASE = 0x1        # table-miss, ARP/LLDP to controller
COOKIE_FORWARDING = 0x2  # per-destination IPv4 forwarding
COOKIE_ADMISSION = 0x3   # source-IP binding + re-marking at the first switch
ENFORCE_MODES = ("dscp", "queue")


@dataclass(frozen=True)
class Rule:
    dpid: int
    priority: int
    match: tuple[tuple[str, Any], ...]     # sorted (field, value) pairs, OFPMatch names
    actions: tuple[tuple, ...]
    cookie: int
    table: int = TABLE_ADMIT

    @cached_property
    def key(self) -> tuple:
        """What identifies a flow entry in OpenFlow (strict match): switch, table,
        priority, match."""
        return (self.dpid, self.table, self.priority, self.match)

    def match_dict(self) -> dict[str, Any]:
        return dict(self.match)

    def to_json(self) -> dict[str, Any]:
        return {"dpid": self.dpid, "table": self.table, "priority": self.priority,
                "match": dict(self.match),
                "actions": [list(a) for a in self.actions], "cookie": f"0x{self.cookie:x}"}


@dataclass(frozen=True)
class FlowMod:
    command: str   # "add" | "modify" | "delete" | "clear" (all rules of rule.dpid)
    rule: Rule


def make_match(**fields: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(fields.items()))


def base_rules(dpid: int) -> list[Rule]:
    """Every switch: ARP and LLDP go to the controller (proxy ARP, link discovery; never
    flooded, so loops in leaf-spine/fat-tree cannot storm), everything unknown is dropped
    (in both tables)."""
    return [
        Rule(dpid, PRIO_MISS, (), (), COOKIE_BASE),
        Rule(dpid, PRIO_CONTROL, make_match(eth_type=ETH_ARP), (("controller",),), COOKIE_BASE),
        Rule(dpid, PRIO_CONTROL, make_match(eth_type=ETH_LLDP), (("controller",),), COOKIE_BASE),
        Rule(dpid, PRIO_MISS, (), (), COOKIE_BASE, TABLE_FORWARD),
    ]


def admission_rules(host_ports: Iterable[tuple[int, int, str]],
                    link_ports: Iterable[tuple[int, int]],
                    trust_host_dscp: bool = False) -> list[Rule]:
    """Table 0. ``host_ports``: (dpid, port, ip) of each located host: its IPv4 passes
    only from its own port with its own source address, re-marked to DSCP 0 (the least
    urgent class: a host's own marking buys nothing). ``link_ports``: (dpid, port) of
    switch links: traffic from another switch passes unchanged.

    ``trust_host_dscp``: a host's packets keep the DSCP the host gave them (the source
    address is still bound to the port). For end-host tagging schemes such as PIAS
    (mininet_fabric/pias.py), whose hosts mark their own flows; the price is that any
    host can then buy priority for anything it sends, so only on a fabric whose hosts
    are trusted. Registered PS flows are still marked by the controller (their rules
    take precedence over admission)."""
    goto = ("goto", TABLE_FORWARD)
    admit = (goto,) if trust_host_dscp else (("set_dscp", 0), goto)
    out = [Rule(dpid, PRIO_ADMIT, make_match(in_port=port, eth_type=ETH_IPV4, ipv4_src=ip),
                admit, COOKIE_ADMISSION)
           for dpid, port, ip in sorted(host_ports)]
    out += [Rule(dpid, PRIO_TRANSIT, make_match(in_port=port), (goto,), COOKIE_ADMISSION)
            for dpid, port in sorted(link_ports)]
    return out


def forwarding_rules(next_ports: Mapping[int, Mapping[str, int]]) -> list[Rule]:
    """``next_ports[dpid][dst_ip] = out_port`` -> one IPv4 rule per switch and destination."""
    return [Rule(dpid, PRIO_FORWARD, make_match(eth_type=ETH_IPV4, ipv4_dst=ip),
                 (("output", port),), COOKIE_FORWARDING, TABLE_FORWARD)
            for dpid, table in sorted(next_ports.items()) for ip, port in sorted(table.items())]


@lru_cache(maxsize=65536)
def flow_match(flow: FlowKey) -> tuple[tuple[str, Any], ...]:
    return make_match(eth_type=ETH_IPV4, ip_proto=IPPROTO_TCP, ipv4_src=flow.src_ip,
                      ipv4_dst=flow.dst_ip, tcp_dst=flow.dst_port)


def ack_match(flow: FlowKey) -> tuple[tuple[str, Any], ...]:
    """The reverse direction of ``flow``'s TCP connection: its ACKs (and ps-lite's
    replies on it), from the listening end's port back to the connecting host."""
    return make_match(eth_type=ETH_IPV4, ip_proto=IPPROTO_TCP, ipv4_src=flow.dst_ip,
                      ipv4_dst=flow.src_ip, tcp_src=flow.dst_port)


def job_ack_rules(flow: FlowKey, level: int, back_hops: list[tuple[int, int]], cookie: int,
                  enforce: str, in_port: int | None = None) -> list[Rule]:
    """Rules that give the ACKs of ``flow`` the flow's own level along ``back_hops`` (the
    path from ``flow``'s destination to its source); ``in_port``: the destination host's
    port on its switch.

    Why: a TCP flow moves only as fast as its ACKs come back. Left unmarked, the ACKs of
    the most urgent job's pull travel in the least urgent class and wait behind the
    other jobs' pushes on the opposite uplink (or starve under strict priority), and
    the urgent flow stalls on its own ACK clock: priority inversion."""
    return _marking_rules(ack_match(flow), PRIO_JOB_ACK, level, back_hops, cookie, enforce,
                          in_port)


def job_flow_rules(flow: FlowKey, level: int, hops: list[tuple[int, int]], cookie: int,
                   enforce: str, in_port: int | None = None) -> list[Rule]:
    """Rules that give ``flow`` priority ``level`` along ``hops`` [(dpid, out_port), ...];
    ``in_port``: the source host's port on the first switch.

    dscp: mark once at the ingress switch (table 0, only packets from the source's own
    port); the DSCP travels with the packet and every egress port's HTB/u32 filter
    classifies on it (set_queue is ignored by the userspace datapath, docs/design.md).
    queue: every switch on the path sets its own egress queue (table 1)."""
    return _marking_rules(flow_match(flow), PRIO_JOB_FLOW, level, hops, cookie, enforce,
                          in_port)


def _marking_rules(match: tuple[tuple[str, Any], ...], priority: int, level: int,
                   hops: list[tuple[int, int]], cookie: int, enforce: str,
                   in_port: int | None) -> list[Rule]:
    if enforce not in ENFORCE_MODES:
        raise ValueError(f"enforce must be one of {ENFORCE_MODES}, got {enforce!r}")
    if not hops or in_port is None:
        return []
    if enforce == "dscp":
        dpid, _port = hops[0]
        return [Rule(dpid, priority, tuple(sorted(match + (("in_port", in_port),))),
                     (("set_dscp", dscp_of_level(level)), ("goto", TABLE_FORWARD)), cookie)]
    return [Rule(dpid, priority, match,
                 (("set_queue", queue_id_of_level(level)), ("output", port)), cookie,
                 TABLE_FORWARD)
            for dpid, port in hops]


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
