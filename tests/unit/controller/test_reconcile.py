"""A switch losing and regaining its controller, and a restarted controller meeting a
switch full of its predecessor's rules (the reconcile core, in process: fake flow tables).
The same against real Open vSwitch is tests/fabric/controller/test_controller_reliability.py."""

from __future__ import annotations

from controller.rules import COOKIE_FORWARDING, FlowMod, Rule
from controller.service import ControllerService
from controller.settling import SETTLE_S
from controller.sinks import TableSink
from controller.config import ControllerConfig
from support.controller_api import RESTART_JOB
from support.controller_fakes import ADMIN as FAKE_ADMIN, make_service, northbound, walk
from controller.fake_fabric import bring_up
from topologies.priority_classes import dscp_of_level


# ============================================================ switch reconnect ======
def test_switch_down_keeps_routes_and_reconnect_restores_the_table_at_once():
    """Pure core: a switch whose control channel drops is still routed through (it keeps
    forwarding, fail-mode secure), gets no flow mods while away, and on reconnect gets
    its whole table back in one go, without waiting for LLDP/ARP rediscovery."""
    svc = bring_up(make_service("two-rack"))
    token = northbound(svc).register_job(FAKE_ADMIN, RESTART_JOB)["token"]
    northbound(svc).progress("job-r", token, {"worker": "w0", "batch": 5})
    tor1 = svc.fabric.dpid_of_name["tor1"]
    assert walk(svc, "h1", "10.0.0.3", tcp_dst=9000) == ("h3", ["tor1", "spine1", "tor2"],
                                                        dscp_of_level(1))
    before = svc.sink.table.of_switch(tor1)
    ports = dict(svc.fabric.ports[tor1])

    sent = len(svc.sink.sent)
    svc.switch_down(tor1)
    assert not [m for m in svc.sink.sent[sent:] if m.rule.dpid == tor1]
    assert walk(svc, "h3", "10.0.0.1")[0] == "h1"    # tor2 and spine1 still route to h1
    assert walk(svc, "h1", "10.0.0.3", tcp_dst=9000)[0] == "h3"

    svc.sink.table.apply([FlowMod("add", Rule(tor1, 7, (("udp_dst", 4242),), (), 0xBAD))])
    svc.switch_up(tor1, ports)                       # no link_seen / host_seen needed
    assert svc.sink.table.of_switch(tor1) == before  # stale rule gone, job rule back
    assert walk(svc, "h1", "10.0.0.3", tcp_dst=9000)[2] == dscp_of_level(1)

def test_reconnect_with_table_read_back_sends_only_the_difference():
    """A switch reconnects holding its old table plus a foreign rule and one changed
    rule: the controller deletes the foreign rule, fixes the changed one, nothing else."""
    svc = bring_up(make_service("two-rack"))
    token = northbound(svc).register_job(FAKE_ADMIN, RESTART_JOB)["token"]
    northbound(svc).progress("job-r", token, {"worker": "w0", "batch": 5})
    tor1 = svc.fabric.dpid_of_name["tor1"]
    before = svc.sink.table.of_switch(tor1)
    ports = dict(svc.fabric.ports[tor1])
    svc.switch_down(tor1)
    stale = Rule(tor1, 7, (("udp_dst", 4242),), (), 0xBAD)
    fwd = next(r for r in before.values() if r.cookie == COOKIE_FORWARDING)
    changed = Rule(tor1, fwd.priority, fwd.match, (("output", 99),), fwd.cookie, fwd.table)
    held = [r for r in before.values() if r != fwd] + [stale, changed]
    svc.sink.table.apply([FlowMod("add", stale), FlowMod("add", changed)])

    sent = len(svc.sink.sent)
    svc.switch_up(tor1, ports, table=held)
    assert sorted((m.command, m.rule.key) for m in svc.sink.sent[sent:]) == sorted(
        [("delete", stale.key), ("modify", fwd.key)])
    assert svc.sink.table.of_switch(tor1) == before


def test_restarted_controller_keeps_owned_rules_until_the_fabric_is_rediscovered():
    """A fresh controller (no hosts known yet) meets a switch full of its predecessor's
    rules: it deletes only foreign ones at once, keeps its own until every host and link
    is found again (then keeps the wanted ones) or SETTLE_S ran out (then deletes)."""
    old = bring_up(make_service("two-rack"))
    tor1 = old.fabric.dpid_of_name["tor1"]
    held = list(old.sink.table.of_switch(tor1).values())
    stale = Rule(tor1, 7, (("udp_dst", 4242),), (), 0xBAD)
    ports = dict(old.fabric.ports[tor1])

    now = [100.0]
    topo = old.config.topology
    for rediscover in (True, False):
        svc = ControllerService(ControllerConfig(topology=topo, admin_token=FAKE_ADMIN),
                                sink=TableSink(), clock=lambda: now[0])
        svc.switch_up(tor1, ports, table=held + [stale])
        assert [(m.command, m.rule) for m in svc.sink.sent] == [("delete", stale)]
        if rediscover:
            # the other switches connect, links and hosts are found again (tor1 stays up)
            for dpid, sw_ports in old.fabric.ports.items():
                if dpid != tor1:
                    svc.switch_up(dpid, sw_ports)
            for src, dst in old.fabric.links.items():
                svc.link_seen(src, dst)
            for ip, loc in old.fabric.hosts.items():
                svc.host_seen(ip, loc.dpid, loc.port, loc.mac)
            assert not [m for m in svc.sink.sent if m.command == "delete" and
                        m.rule.dpid == tor1 and m.rule != stale]
            assert set(svc.installed.of_switch(tor1).values()) == set(held)
        else:
            now[0] += SETTLE_S + 0.1
            svc.tick()          # nothing rediscovered: the forwarding rules go
            deleted = {m.rule for m in svc.sink.sent if m.command == "delete"}
            assert {r for r in held if r.cookie == COOKIE_FORWARDING} <= deleted
