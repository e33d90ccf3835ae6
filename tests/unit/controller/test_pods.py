"""A controller per pod (controller/pods.py): who owns which switch, the prefixes, and
three controllers (two pods and the core) routing one fabric together, against fake
flow tables."""

import ipaddress

import pytest
from scapy.layers.l2 import ARP, Ether

from controller import packets
from controller.pods import (GATEWAY_MAC, PRIO_PREFIX, pod_prefixes, pod_scope,
                             scoped_topology, switch_pods)
from sluice_common.errors import InputError
from support.controller_fakes import ADMIN, northbound
from support.pod_fakes import make_pod_services, walk_pods
from topologies import load_topology, parse_topology
from topologies.generators import leaf_spine
from topologies.mininet_topo import mac_of


def test_pods_own_their_tors_and_the_switches_joining_them():
    assert switch_pods(load_topology("two-pod")) == {
        "tor1": "pod1", "tor2": "pod1", "agg1": "pod1", "tor3": "pod2", "tor4": "pod2",
        "agg2": "pod2", "core1": None}
    fat = switch_pods(load_topology("fat-tree"))
    assert fat["agg3_1"] == fat["edge3_2"] == "pod3"
    assert {n for n, p in fat.items() if p is None} == {"core1", "core2", "core3", "core4"}


def test_a_non_core_switch_shared_by_pods_is_an_error_naming_it():
    topo = parse_topology(leaf_spine(leaves=4, spines=2, racks_per_domain=2), "ls.yaml")
    with pytest.raises(InputError) as err:
        switch_pods(topo)
    assert err.value.source == "ls.yaml" and "switch spine" in str(err.value)
    assert "role core" in str(err.value)


def test_a_pod_joined_only_through_the_core_is_an_error():
    data = leaf_spine(leaves=4, spines=2, racks_per_domain=2)
    for s in data["switches"]:
        if s["role"] == "spine":
            s["role"] = "core"
    with pytest.raises(InputError, match="pod pod1's own switches do not join"):
        switch_pods(parse_topology(data, "ls.yaml"))


def test_prefixes_cover_exactly_each_pods_hosts():
    assert pod_prefixes(load_topology("two-pod")) == {"pod1": ["10.1.0.0/29"],
                                                       "pod2": ["10.2.0.0/29"]}
    fat = load_topology("fat-tree")      # consecutive addresses: no one prefix fits
    prefixes = pod_prefixes(fat)
    for pod, nets in prefixes.items():
        nets = [ipaddress.IPv4Network(n) for n in nets]
        for h in fat.hosts:
            inside = any(ipaddress.IPv4Address(h.ip) in n for n in nets)
            assert inside == (fat.domain_of(h.name) == pod), (pod, h.name)


def test_unknown_pod_names_the_pods_there_are():
    with pytest.raises(InputError) as err:
        pod_scope(load_topology("two-pod"), "pod9")
    assert err.value.field == "pod" and "pod1, pod2" in err.value.reason


def test_scoped_topology_keeps_the_pod_and_names_its_core_neighbours():
    full = load_topology("two-pod")
    t = scoped_topology(full, pod_scope(full, "pod2"))
    assert [h.name for h in t.hosts] == ["h5", "h6", "h7", "h8"]
    assert {s.name for s in t.switches} == {"tor3", "tor4", "agg2", "core1"}
    assert {(l.a, l.b) for l in t.links} == {("tor3", "agg2"), ("tor4", "agg2"),
                                              ("agg2", "core1")}


def test_every_host_reaches_every_other_across_three_controllers():
    full, svcs = make_pod_services()
    for a in full.hosts:
        for b in full.hosts:
            if a is b:
                continue
            same_pod = full.domain_of(a.name) == full.domain_of(b.name)
            # a host addresses another pod's host to the gateway MAC (its ARP answer)
            end, hops, pkt = walk_pods(full, svcs, a.name, b.ip,
                                       mac_of(b.ip) if same_pod else GATEWAY_MAC)
            assert end == b.name, f"{a.name}->{b.name}: {end} via {hops}"
            assert pkt["eth_dst"] == mac_of(b.ip)       # delivered to the host's own MAC
            assert ("core1" in hops) == (not same_pod)


def test_each_controller_writes_only_its_own_switches():
    full, svcs = make_pod_services()
    dpid = {s.name: s.dpid for s in full.switches}
    for name, svc in svcs.items():
        mine = {dpid[n] for n in svc.config.scope.owned}
        assert {r.dpid for r in svc.sink.table.rules.values()} == mine
    core = svcs["core"].sink.table.rules.values()
    prefixes = sorted(dict(r.match)["ipv4_dst"] for r in core if r.priority == PRIO_PREFIX)
    assert prefixes == [("10.1.0.0", "255.255.255.248"), ("10.2.0.0", "255.255.255.248")]
    assert not [r for r in core if "ipv4_src" in dict(r.match)]      # no hosts, no jobs


def test_another_pods_switch_connecting_is_ignored():
    full, svcs = make_pod_services()
    pod1 = svcs["pod1"]
    before = dict(pod1.sink.table.rules)
    pod1.switch_up(full.switch_by_name["tor3"].dpid, {1: "tor3-eth1"})
    assert full.switch_by_name["tor3"].dpid not in pod1.fabric.connected
    assert pod1.sink.table.rules == before


def _arp(src_ip, dst_ip):
    mac = mac_of(src_ip)
    return packets.classify(bytes(Ether(src=mac, dst="ff:ff:ff:ff:ff:ff") /
                                  ARP(op=1, hwsrc=mac, psrc=src_ip, pdst=dst_ip)))


def test_arp_for_another_pods_host_is_answered_with_the_gateway_mac():
    full, svcs = make_pod_services()
    pod1, tor1 = svcs["pod1"], full.switch_by_name["tor1"].dpid
    pod1.sink.frames.clear()
    pod1.on_arp(tor1, 1, _arp("10.1.0.1", "10.2.0.3"))
    (dpid, port, frame), = pod1.sink.frames
    answer = Ether(frame)
    assert (dpid, port) == (tor1, 1)
    assert answer[ARP].op == 2 and answer[ARP].psrc == "10.2.0.3"
    assert answer[ARP].hwsrc == GATEWAY_MAC and answer[ARP].pdst == "10.1.0.1"


def test_no_gateway_answer_before_the_pod_reaches_the_core():
    full, svcs = make_pod_services(scopes=("pod1",))
    pod1, tor1 = svcs["pod1"], full.switch_by_name["tor1"].dpid
    agg1 = full.switch_by_name["agg1"].dpid
    # the uplink to the core goes down: no prefix route leaves the pod
    pod1.update_ports(agg1, {p: n for p, n in pod1.fabric.ports[agg1].items()
                             if pod1.fabric.links.get((agg1, p), (0,))[0]
                             != full.switch_by_name["core1"].dpid})
    pod1.sink.frames.clear()
    pod1.on_arp(tor1, 1, _arp("10.1.0.1", "10.2.0.3"))
    assert pod1.sink.frames == []


def test_a_job_gets_rules_only_on_its_pods_switches_and_other_pods_hosts_are_refused():
    full, svcs = make_pod_services()
    pod2 = svcs["pod2"]
    job = {"id": "j2", "servers": [{"id": "s0", "ip": "10.2.0.1", "port": 9000}],
           "workers": [{"id": "w0", "ip": "10.2.0.3", "port": 9001}]}
    northbound(pod2).register_job(ADMIN, job)
    cookie = pod2.registry.jobs["j2"].cookie
    assert pod2.sink.table.with_cookie(cookie)
    assert not any(s.sink.table.with_cookie(cookie) for n, s in svcs.items() if n != "pod2")
    end, _, pkt = walk_pods(full, svcs, "h7", "10.2.0.1", mac_of("10.2.0.1"), tcp_dst=9000)
    assert end == "h5" and pkt["ip_dscp"] != 0       # marked at its first switch
    across = dict(job, id="j3", workers=[{"id": "w0", "ip": "10.1.0.1", "port": 9001}])
    with pytest.raises(Exception) as err:
        northbound(pod2).register_job(ADMIN, across)
    assert "10.1.0.1" in str(err.value)


def test_leaving_the_scope_needs_every_hop_to_route_the_prefix():
    from controller.pods import leaves_by
    links = {(1, 2): (3, 1), (3, 1): (1, 2), (3, 5): (9, 1), (9, 1): (3, 5)}
    assert not leaves_by({1: {"10.2.0.0/29": 2}}, links, 1, "10.2.0.0/29", {9})
    both = {1: {"10.2.0.0/29": 2}, 3: {"10.2.0.0/29": 5}}
    assert leaves_by(both, links, 1, "10.2.0.0/29", {9})
    assert not leaves_by(both, links, 1, "10.1.0.0/29", {9})     # another prefix
