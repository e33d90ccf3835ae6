"""A new priority rule is one registry entry (sluice_common/rank_rules.py) and
reaches every user of the axis: the controller (its command line, config, REST, rankers
on the switches, report hints), the simulator's command line, the fluid model, the
heavy-tail experiment's modes, the exchange model's predictions and `sluice run`."""

from __future__ import annotations

import argparse

import pytest

from sluice_common import rank_rules
from sluice_common.rank_rules import ORDER, RankRule

from support.controller_fakes import ADMIN, make_service, northbound, walk
from controller.fake_fabric import bring_up
from topologies.priority_classes import dscp_of_level

NAME = "arrival"      # first come, first served between jobs: the earlier one goes first
MB = 1 << 20


@pytest.fixture
def arrival_rule():
    # the one place: a rule of the ORDER shape, its key its registration order
    rule = rank_rules.register(RankRule(NAME, "the job registered first goes first",
                                        ORDER, key=lambda j: (j.order, j.job)))
    yield rule
    rank_rules.unregister(NAME)


def _parser(configure) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser


def test_the_command_lines_offer_it(arrival_rule):
    from controller.cli import configure_controller
    from end_to_end.cli import configure_run
    from job_scheduler.simulation.cli import configure_simulate

    assert _parser(configure_controller).parse_args(["--rank", NAME]).rank == NAME
    assert NAME in _parser(configure_controller).format_help()
    assert _parser(configure_run).parse_args(["jobs.yaml", "--rank", NAME]).rank == NAME
    assert _parser(configure_simulate).parse_args(
        ["--workload", "w", "--priority", NAME]).priority == NAME
    # the sluice policy's pricing with the fabric's rule
    assert _parser(configure_simulate).parse_args(
        ["--workload", "w", "--price-priority", NAME]).price_priority == NAME


def _job(name, server_ip, port, total, bpb):
    return {"id": name, "servers": [{"id": "s0", "ip": server_ip, "port": port}],
            "workers": [{"id": f"w{i}", "ip": ip, "port": port + 1}
                        for i, ip in enumerate(["10.0.0.3", "10.0.0.4"])],
            "total_batches": total, "bytes_per_batch": bpb}


def test_the_controller_ranks_by_it_on_the_switches_and_over_rest(arrival_rule):
    from controller.api import RankRule as RankBody

    assert NAME in RankBody.model_json_schema()["properties"]["rule"]["enum"]
    assert RankBody(rule=NAME).rule == NAME
    svc = bring_up(make_service("two-rack", rank=NAME))
    big = _job("big", "10.0.0.1", 9000, 400, 2 * MB)       # registered first, larger
    small = _job("small", "10.0.0.2", 9100, 100, MB)
    nb = northbound(svc)
    nb.register_job(ADMIN, big)
    nb.register_job(ADMIN, small)
    hosts = {"10.0.0.1": "h1", "10.0.0.2": "h2", "10.0.0.3": "h3"}

    def push_dscp(body):
        s = body["servers"][0]
        return walk(svc, hosts[body["workers"][0]["ip"]], s["ip"], tcp_dst=s["port"])[2]

    # the registration order, where `remaining` would put the small job first
    assert (push_dscp(big), push_dscp(small)) == (dscp_of_level(0), dscp_of_level(1))
    assert NAME in svc.rank()["rules"]
    assert nb.set_rank(ADMIN, {"rule": "remaining"})["previous"] == NAME
    assert (push_dscp(big), push_dscp(small)) == (dscp_of_level(1), dscp_of_level(0))
    assert nb.set_rank(ADMIN, {"rule": NAME})["rule"] == NAME
    assert push_dscp(big) == dscp_of_level(0)


def test_the_models_and_the_experiments_use_it(arrival_rule):
    from end_to_end.predict import _classes
    from mininet_fabric import baselines
    from mininet_tests import fluid
    from mininet_tests.heavy_tail.summary import all_modes, modes_for

    assert NAME in fluid.modes() and NAME in modes_for("none") and NAME in all_modes()
    assert baselines.split_mode(f"{NAME}+off-shallow", rank_rules.names()) == (
        NAME, "off-shallow")
    # one bottleneck: the large job that came first keeps it, the small one waits
    jobs = [fluid.FluidJob("large", 0.0, 10, 1e6, 2.0), fluid.FluidJob("small", 0.1, 1, 1e6, 2.0)]
    jct = fluid.simulate(jobs, NAME, capacity=1e6, dt=0.01)
    srpt = fluid.simulate(jobs, "remaining", capacity=1e6, dt=0.01)
    assert jct["large"] < srpt["large"] and jct["small"] > srpt["small"]
    records = [{"name": n, "worker_hosts": ["h3"], "batches": b, "bytes_per_batch": MB}
               for n, b in (("first", 100), ("second", 10))]
    assert _classes(records, {"first": 0, "second": 0}, NAME) == {"first": 0, "second": 1}
    assert _classes(records, {"first": 0, "second": 0}, "remaining") == {"first": 1, "second": 0}
