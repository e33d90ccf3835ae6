"""Forwarding and rule generation against a fake flow table (no switch)."""

import pytest

from controller import rules as R
from controller.flowtable import FlowTable
from support.controller_fakes import make_service, walk
from controller.fake_fabric import bring_up


@pytest.mark.parametrize("topology", ["two-rack", "leaf-spine", "fat-tree",
                                      "leaf-spine:leaves=3,spines=2,hosts_per_leaf=1"])
def test_every_host_reaches_every_other_host(topology):
    svc = bring_up(make_service(topology))
    hosts = svc.config.topology.hosts
    for a in hosts:
        for b in hosts:
            if a is b:
                continue
            end, hops, _ = walk(svc, a.name, b.ip)
            assert end == b.name, f"{a.name}->{b.name} ended at {end} via {hops}"
            # a shortest path (ECMP may pick another spine than networkx's path)
            assert len(hops) == len(svc.config.topology.path(a.name, b.name)) - 2


def test_equal_cost_paths_are_spread_over_spines():
    svc = bring_up(make_service("leaf-spine"))
    spines_used = {walk(svc, "h1", h.ip)[1][1] for h in svc.config.topology.hosts
                   if h.rack != "rack1"}
    assert spines_used == {"spine1", "spine2"}


def test_arp_and_lldp_go_to_the_controller_never_flooded():
    svc = bring_up(make_service("fat-tree"))
    for rule in svc.sink.table.rules.values():
        assert ("output", 0xfffffffb) not in rule.actions   # OFPP_FLOOD
        assert ("output", 0xfffffffc) not in rule.actions   # OFPP_ALL
    table = svc.sink.table
    for s in svc.config.topology.switches:
        arp = table.lookup(s.dpid, {"eth_type": 0x0806, "in_port": 1})
        assert arp.actions == (("controller",),)
        # anything else from a host port (IPv6 here) has no admission rule: dropped
        host_port = svc.fabric.edge_ports(s.dpid)
        if host_port:
            unknown = table.lookup(s.dpid, {"eth_type": 0x86dd, "in_port": host_port[0]})
            assert unknown.priority == R.PRIO_MISS and unknown.actions == ()
        assert table.process(s.dpid, {"eth_type": 0x86dd, "in_port": 999}) == ("drop", None)


def test_unknown_destination_is_dropped_not_flooded():
    svc = bring_up(make_service("two-rack"))
    end, _, _ = walk(svc, "h1", "10.9.9.9")
    assert end == "drop:tor1"


def test_rules_appear_only_once_hosts_and_links_are_known():
    svc = bring_up(make_service("two-rack"), hosts=False)
    assert not [r for r in svc.sink.table.rules.values()
                if r.cookie in (R.COOKIE_FORWARDING, R.COOKIE_ADMISSION)
                and "in_port" not in r.match_dict()]
    bring_up(svc)
    assert walk(svc, "h1", "10.0.0.4")[0] == "h4"


def test_diff_sends_nothing_when_nothing_changed_and_only_changes_otherwise():
    a = R.Rule(1, 100, R.make_match(ipv4_dst="10.0.0.1"), (("output", 1),), 2)
    b = R.Rule(1, 100, R.make_match(ipv4_dst="10.0.0.2"), (("output", 2),), 2)
    installed = {a.key: a, b.key: b}
    assert R.diff(installed, [a, b]) == []
    b2 = R.Rule(1, 100, b.match, (("output", 3),), 2)
    c = R.Rule(2, 100, b.match, (("output", 1),), 2)
    mods = R.diff(installed, [b2, c])
    assert sorted((m.command, m.rule.key) for m in mods) == sorted(
        [("delete", a.key), ("modify", b.key), ("add", c.key)])


def test_flow_table_lookup_prefers_priority_and_modify_keeps_cookie():
    t = FlowTable()
    low = R.Rule(1, 100, R.make_match(eth_type=0x800, ipv4_dst="10.0.0.2"), (("output", 1),), 2)
    high = R.Rule(1, 200, R.make_match(eth_type=0x800, ipv4_dst="10.0.0.2", tcp_dst=9000),
                  (("set_dscp", 56), ("output", 1)), 77)
    t.apply([R.FlowMod("add", low), R.FlowMod("add", high)])
    pkt = {"eth_type": 0x800, "ipv4_dst": "10.0.0.2", "tcp_dst": 9000}
    assert t.lookup(1, pkt) is high
    assert t.lookup(1, {**pkt, "tcp_dst": 80}) is low
    t.apply([R.FlowMod("modify", R.Rule(1, 200, high.match, (("output", 2),), 0))])
    assert t.lookup(1, pkt).cookie == 77 and t.lookup(1, pkt).actions == (("output", 2),)
    t.apply([R.FlowMod("clear", R.Rule(1, 0, (), (), 0))])
    assert t.lookup(1, pkt) is None


def test_queue_mode_sets_a_queue_on_every_hop():
    from controller.ranking import PUSH, FlowKey
    f = FlowKey("a", PUSH, "w0", "s0", "10.0.0.1", "10.0.0.3", 9000)
    hops = [(1, 3), (3, 2), (2, 1)]
    q = R.job_flow_rules(f, 2, hops, 0x99, "queue", in_port=5)
    assert [r.dpid for r in q] == [1, 3, 2]
    assert all(r.actions[0] == ("set_queue", 2) for r in q)
    assert all(r.table == R.TABLE_FORWARD for r in q)
    d = R.job_flow_rules(f, 2, hops, 0x99, "dscp", in_port=5)
    # marked at the first switch, only when it comes from the source host's own port
    assert len(d) == 1 and d[0].actions == (("set_dscp", 40), ("goto", R.TABLE_FORWARD))
    assert d[0].table == R.TABLE_ADMIT and d[0].match_dict()["in_port"] == 5
    assert R.job_flow_rules(f, 2, hops, 0x99, "dscp") == []   # source port unknown
