"""Failures routed around (fake flow table): a spine whose control channel is gone (echo
liveness gave up on it: it may be dead) and a spine link that went down are avoided
wherever another path exists, with the job's priority rules on the new path; a ToR
(the only way to its hosts) is still routed through."""

import pytest

from controller import rules as R
from support.controller_fakes import ADMIN, make_service, northbound, walk
from controller.fake_fabric import bring_up

# leaf-spine: h1 under leaf1, h3 under leaf2 (see topologies/builtin)
def job_between(svc, src_host, dst_host):
    t = svc.config.topology
    src, dst = t.host_by_name[src_host], t.host_by_name[dst_host]
    body = {"id": "job-f", "servers": [{"id": "s0", "ip": dst.ip, "port": 9000}],
            "workers": [{"id": "w0", "ip": src.ip, "port": 9001}]}
    return northbound(svc).register_job(ADMIN, body), dst


def cross_rack_pair(svc):
    t = svc.config.topology
    a = t.hosts[0]
    b = next(h for h in t.hosts if h.rack != a.rack)
    return a.name, b.name


@pytest.mark.parametrize("enforce", ["dscp", "queue"])
@pytest.mark.parametrize("failure", ["switch_silent", "link_down"])
@pytest.mark.parametrize("topology", ["leaf-spine", "fat-tree"])
def test_a_failed_spine_is_routed_around_with_the_jobs_rules(topology, failure, enforce):
    svc = bring_up(make_service(topology, enforce=enforce))
    src, dst_name = cross_rack_pair(svc)
    job, dst = job_between(svc, src, dst_name)
    end, hops, dscp = walk(svc, src, dst.ip, tcp_dst=9000)
    assert end == dst_name
    marked = dscp
    by_name = svc.fabric.dpid_of_name
    victim = hops[1]                       # the first switch above the source's ToR
    if failure == "switch_silent":
        svc.switch_down(by_name[victim])
    else:                                  # the ToR's port towards the victim goes down
        tor = by_name[hops[0]]
        port = next(p for (d, p), (peer, _) in svc.fabric.links.items()
                    if d == tor and peer == by_name[victim])
        ports = dict(svc.fabric.ports[tor])
        del ports[port]
        svc.update_ports(tor, ports)
    end, new_hops, dscp = walk(svc, src, dst.ip, tcp_dst=9000)
    assert end == dst_name and victim not in new_hops, new_hops
    assert dscp == marked                  # still marked at its level (dscp mode)
    if enforce == "queue":                 # a queue rule on every switch of the new path
        cookie = int(job["cookie"], 16)
        with_rules = {svc.fabric.name_of_dpid[r.dpid] for r in svc.installed.rules.values()
                      if r.cookie == cookie}
        assert set(new_hops) <= with_rules, (new_hops, with_rules)
    # every host still reaches every other host
    for a in svc.config.topology.hosts:
        for b in svc.config.topology.hosts:
            if a is not b:
                assert walk(svc, a.name, b.ip)[0] == b.name


def test_a_tor_without_controller_is_still_the_way_to_its_hosts():
    svc = bring_up(make_service("leaf-spine"))
    src, dst_name = cross_rack_pair(svc)
    dst = svc.config.topology.host_by_name[dst_name]
    tor = walk(svc, src, dst.ip)[1][-1]
    svc.switch_down(svc.fabric.dpid_of_name[tor])
    assert walk(svc, src, dst.ip)[0] == dst_name


def test_a_spine_coming_back_is_used_again():
    svc = bring_up(make_service("leaf-spine"))
    spines = {walk(svc, "h1", h.ip)[1][1] for h in svc.config.topology.hosts
              if h.rack != "rack1"}
    assert len(spines) == 2
    victim = svc.fabric.dpid_of_name[sorted(spines)[0]]
    ports = dict(svc.fabric.ports[victim])
    svc.switch_down(victim)
    assert len({walk(svc, "h1", h.ip)[1][1] for h in svc.config.topology.hosts
                if h.rack != "rack1"}) == 1
    svc.switch_up(victim, ports)
    assert {walk(svc, "h1", h.ip)[1][1] for h in svc.config.topology.hosts
            if h.rack != "rack1"} == spines
