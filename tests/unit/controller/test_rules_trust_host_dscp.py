"""``--trust-host-dscp`` (end-host tagging such as PIAS): admission keeps the DSCP a host
gave its packets instead of re-marking it to 0; the source address is still bound to
the port, registered PS flows are still marked by the controller, and the default
stays "a host's own marking buys nothing". Against the fake flow table, no switch."""

import argparse

import pytest

from controller import cli
from controller import rules as R
from support.controller_fakes import ADMIN, make_service, northbound, walk
from controller.fake_fabric import bring_up
from topologies.priority_classes import LEAST_URGENT, dscp_of_level

JOB = {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
       "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001}]}
LEAST = dscp_of_level(LEAST_URGENT)


def service(trust: bool, job: bool = False):
    svc = bring_up(make_service("two-rack", trust_host_dscp=trust))
    if job:
        northbound(svc).register_job(ADMIN, JOB)
    return svc


@pytest.mark.parametrize("dscp", [56, 24, 8, 0])
def test_trusted_hosts_keep_their_own_marking(dscp):
    end, _hops, arrived = walk(service(True), "h4", "10.0.0.1", tcp_dst=5001, dscp=dscp)
    assert end == "h1" and arrived == dscp


@pytest.mark.parametrize("dscp", [56, 8])
def test_by_default_a_hosts_marking_is_reset(dscp):
    end, _hops, arrived = walk(service(False), "h4", "10.0.0.1", tcp_dst=5001, dscp=dscp)
    assert end == "h1" and arrived == LEAST


def test_trust_does_not_lift_the_source_address_binding():
    end, _hops, _ = walk(service(True), "h4", "10.0.0.1", src_ip="10.0.0.2", dscp=56)
    assert end.startswith("drop:")


def test_a_registered_ps_flow_is_still_marked_by_the_controller():
    svc = service(True, job=True)
    push = next(f for f in svc.flows()["flows"] if f["kind"] == "push")
    for host_dscp in (0, 56):
        assert walk(svc, "h1", "10.0.0.3", tcp_dst=9000, dscp=host_dscp)[2] == push["dscp"]


def test_only_the_host_ports_admission_rules_change():
    hosts, links = [(1, 1, "10.0.0.1")], [(1, 3)]
    strict, trusted = R.admission_rules(hosts, links), R.admission_rules(hosts, links, True)
    assert [r.key for r in strict] == [r.key for r in trusted]
    assert strict[0].actions == (("set_dscp", 0), ("goto", R.TABLE_FORWARD))
    assert trusted[0].actions == (("goto", R.TABLE_FORWARD),)
    assert strict[1:] == trusted[1:]


def test_the_command_line_flag_reaches_the_config(monkeypatch):
    monkeypatch.setenv("SLUICE_ADMIN_TOKEN", "x" * 24)
    parser = argparse.ArgumentParser()
    cli.configure_controller(parser)
    for argv, want in (([], False), (["--trust-host-dscp"], True)):
        config = cli.config_of(parser.parse_args(argv))
        assert config.trust_host_dscp is want
