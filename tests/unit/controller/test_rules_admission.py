"""No host can buy priority (rule generation against the fake flow table, no switch):
at its first switch every packet is re-marked to the least urgent class unless it is a
registered PS flow from the right port, and a packet whose source address is not the
one bound to its ingress port is dropped."""

import pytest

from controller import rules as R
from support.controller_fakes import ADMIN, make_service, northbound, walk
from controller.fake_fabric import bring_up
from topologies.priority_classes import LEAST_URGENT, dscp_of_level

JOB = {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
       "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001}]}
LEAST = dscp_of_level(LEAST_URGENT)


def with_job(enforce="dscp"):
    svc = bring_up(make_service("two-rack", enforce=enforce))
    northbound(svc).register_job(ADMIN, JOB)
    return svc


@pytest.mark.parametrize("dscp", [56, 46, 8, 0])
def test_a_hosts_own_marking_is_reset_to_the_least_urgent_class(dscp):
    svc = with_job()
    # plain traffic, and traffic towards the PS server's port from a host of no job
    for dst, port in (("10.0.0.1", None), ("10.0.0.3", 9000)):
        end, _hops, arrived = walk(svc, "h4" if dst == "10.0.0.1" else "h2", dst,
                                   tcp_dst=port, dscp=dscp)
        assert end in ("h1", "h3") and arrived == LEAST


def test_the_registered_ps_flow_is_marked_at_its_level():
    svc = with_job()
    flows = {f["kind"]: f for f in svc.flows()["flows"]}
    end, hops, arrived = walk(svc, "h1", "10.0.0.3", tcp_dst=9000, dscp=0)
    assert (end, hops) == ("h3", ["tor1", "spine1", "tor2"])
    assert arrived == flows["push"]["dscp"] != LEAST
    # marking the packet itself changes nothing either way
    assert walk(svc, "h1", "10.0.0.3", tcp_dst=9000, dscp=56)[2] == flows["push"]["dscp"]


@pytest.mark.parametrize("enforce", ["dscp", "queue"])
def test_a_forged_source_address_is_dropped_at_the_first_switch(enforce):
    svc = with_job(enforce)
    # h2 (tor1, port 2) pretends to be the job's worker h1, and to be a host of the
    # other rack, and an address no host has
    for forged in ("10.0.0.1", "10.0.0.4", "10.9.9.9"):
        assert walk(svc, "h2", "10.0.0.3", tcp_dst=9000, src_ip=forged, dscp=56)[0] == \
            "drop:tor1"
    assert walk(svc, "h2", "10.0.0.3", tcp_dst=9000)[0] == "h3"       # its own address


def test_an_arp_claim_from_another_port_does_not_move_the_binding():
    svc = with_job()
    h1 = svc.fabric.hosts["10.0.0.1"]
    h2 = svc.fabric.hosts["10.0.0.2"]
    assert not svc.host_seen("10.0.0.1", h2.dpid, h2.port, "02:00:00:00:00:99")
    assert svc.fabric.hosts["10.0.0.1"] == h1
    assert walk(svc, "h2", "10.0.0.3", tcp_dst=9000, src_ip="10.0.0.1")[0] == "drop:tor1"
    # a real move: the old port goes away first, then the host speaks on the new one
    ports = dict(svc.fabric.ports[h1.dpid])
    del ports[h1.port]
    svc.update_ports(h1.dpid, ports)
    assert svc.host_seen("10.0.0.1", h2.dpid, 7, "02:00:00:00:00:01")


def test_admission_rules_per_host_and_per_link_port():
    svc = with_job()
    admission = [r for r in svc.installed.rules.values() if r.cookie == R.COOKIE_ADMISSION]
    hosts = {(r.dpid, r.match_dict()["in_port"], r.match_dict()["ipv4_src"])
             for r in admission if r.priority == R.PRIO_ADMIT}
    assert hosts == {(l.dpid, l.port, ip) for ip, l in svc.fabric.hosts.items()}
    assert all(r.actions == (("set_dscp", LEAST), ("goto", R.TABLE_FORWARD))
               for r in admission if r.priority == R.PRIO_ADMIT)
    transit = {(r.dpid, r.match_dict()["in_port"]) for r in admission
               if r.priority == R.PRIO_TRANSIT}
    assert transit == set(svc.fabric.links)
