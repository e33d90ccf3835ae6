"""`sluice fabric check --controller` registers its two flows as two jobs: under every
ranking rule the controller (its service on fake switches, no I/O) must rank the check's
high job above its low one and mark the unmarked iperf3 packets accordingly; bad
--controller-api input exits 2."""

from __future__ import annotations

import pytest

from sluice_common.rank_rules import names as rule_names
from support.controller_fakes import ADMIN, make_service, northbound, walk
from controller.fake_fabric import bring_up
from mininet_fabric.lock import FabricError
from mininet_tests.priority_check import (CHECK_JOBS, IPERF_PORTS, check_registrations,
                                          pick_contended_pair, push_level)
from sluice.cli import main as sluice_main
from topologies import load_topology
from topologies import priority_classes as pc


@pytest.mark.parametrize("topology", ["two-rack", "leaf-spine", "fat-tree"])
@pytest.mark.parametrize("rule", rule_names())
def test_every_rule_puts_the_checks_high_flow_first(topology, rule):
    topo = load_topology(topology)
    svc = bring_up(make_service(topo, rank=rule))
    pair = pick_contended_pair(topo)
    regs = check_registrations(pair, lambda h: topo.host_by_name[h].ip)
    assert [b["id"] for b, _ in regs] == list(CHECK_JOBS)
    for body, batch in regs:
        token = northbound(svc).register_job(ADMIN, body)["token"]
        northbound(svc).progress(body["id"], token, {"worker": "w0", "batch": batch})
    dst_ip = topo.host_by_name[pair.dst].ip
    # the senders mark nothing: what arrives is the controller's marking
    end_h, _, dscp_h = walk(svc, pair.high_src, dst_ip, tcp_dst=IPERF_PORTS[0], dscp=0)
    end_l, _, dscp_l = walk(svc, pair.low_src, dst_ip, tcp_dst=IPERF_PORTS[1], dscp=0)
    assert end_h == end_l == pair.dst
    high, low = push_level(svc.flows(CHECK_JOBS[0]), CHECK_JOBS[0]), \
        push_level(svc.flows(CHECK_JOBS[1]), CHECK_JOBS[1])
    assert high < low, (rule, high, low)
    assert (pc.level_of_dscp(dscp_h), pc.level_of_dscp(dscp_l)) == (high, low)
    for body, _ in regs:
        svc.remove_job(body["id"])
    assert svc.flows()["flows"] == []


def test_push_level_needs_the_jobs_push_flow():
    flows = {"flows": [{"job": "a", "kind": "pull", "level": 0},
                       {"job": "a", "kind": "push", "level": 3}]}
    assert push_level(flows, "a") == 3
    with pytest.raises(FabricError, match="no level"):
        push_level(flows, "b")


@pytest.mark.parametrize("api, token, words", [
    ("ftp://127.0.0.1:8080", "t" * 32, "--controller-api"),
    ("http://127.0.0.1:notaport", "t" * 32, "bad port"),
    ("http://127.0.0.1:8080", None, "SLUICE_ADMIN_TOKEN"),
])
def test_controller_api_bad_input_exits_2(api, token, words, monkeypatch, capsys):
    if token is None:
        monkeypatch.delenv("SLUICE_ADMIN_TOKEN", raising=False)
    else:
        monkeypatch.setenv("SLUICE_ADMIN_TOKEN", token)
    argv = ["fabric", "check", "--controller", "127.0.0.1:6653", "--controller-api", api]
    assert sluice_main(argv) == 2
    assert words in capsys.readouterr().err
