"""The job ranking rules inside the controller: registration sizes, remaining/attained
levels on the (fake) switches, switching the rule at run time over REST, /metrics."""

import pytest

from controller.api import ApiServer
from controller.client import ControllerClient, ControllerError
from controller.api import status_of
from controller.errors import Refused
from support.controller_fakes import ADMIN, make_service, northbound, walk
from controller.fake_fabric import bring_up
from topologies.priority_classes import dscp_of_level

MB = 1 << 20


def job(name, server_ip, worker_ips, port, total=None, bpb=None):
    body = {"id": name, "servers": [{"id": "s0", "ip": server_ip, "port": port}],
            "workers": [{"id": f"w{i}", "ip": ip, "port": port + 1}
                        for i, ip in enumerate(worker_ips)]}
    if total is not None:
        body["total_batches"] = total
    if bpb is not None:
        body["bytes_per_batch"] = bpb
    return body


# PS in rack 1, workers in rack 2: every flow crosses the rack uplinks.
BIG = job("big", "10.0.0.1", ["10.0.0.3", "10.0.0.4"], 9000, total=400, bpb=2 * MB)
SMALL = job("small", "10.0.0.2", ["10.0.0.3", "10.0.0.4"], 9100, total=100, bpb=MB)


def dscps(svc, name):
    """(push DSCP of w0, pull DSCP of w0) as packets carry them through the fabric."""
    body = {"big": BIG, "small": SMALL}[name]
    s, w0 = body["servers"][0], body["workers"][0]
    host = {"10.0.0.1": "h1", "10.0.0.2": "h2", "10.0.0.3": "h3", "10.0.0.4": "h4"}
    push = walk(svc, host[w0["ip"]], s["ip"], tcp_dst=s["port"])[2]
    pull = walk(svc, host[s["ip"]], w0["ip"], tcp_dst=w0["port"])[2]
    return push, pull


def two_jobs(rank, **config):
    svc = bring_up(make_service("two-rack", rank=rank, **config))
    tb = northbound(svc).register_job(ADMIN, BIG)["token"]
    ts = northbound(svc).register_job(ADMIN, SMALL)["token"]
    return svc, tb, ts


def test_registration_carries_sizes_and_rejects_bad_ones():
    svc, _, _ = two_jobs("remaining")
    big = next(j for j in svc.jobs() if j["id"] == "big")
    assert big["total_batches"] == 400 and big["bytes_per_batch"] == 2 * MB
    assert big["remaining_bytes"] == 400 * 2 * MB
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(Refused) as err:
            northbound(svc).register_job(ADMIN, {**job("x", "10.0.0.1", ["10.0.0.3"], 9500), "total_batches": bad})
        assert status_of(err.value) == 400 and "total_batches" in err.value.reason
    assert {j["id"] for j in svc.jobs()} == {"big", "small"}


def test_remaining_small_job_first_push_and_pull_share_its_class():
    svc, tb, ts = two_jobs("remaining")
    assert dscps(svc, "small") == (dscp_of_level(0), dscp_of_level(0))
    assert dscps(svc, "big") == (dscp_of_level(1), dscp_of_level(1))


def test_remaining_re_ranks_at_batch_boundaries():
    svc, tb, ts = two_jobs("remaining")
    # big: 400 batches x 2 MB, small: 100 x 1 MB. A worker on batch N has N - 1 done.
    northbound(svc).progress("big", tb, {"worker": "w0", "batch": 170})
    answer, _ = northbound(svc).progress("big", tb, {"worker": "w1", "batch": 170})
    assert answer["changed_rules"] == 0                  # 338 done: 124 MB left > 100 MB
    assert dscps(svc, "big")[0] == dscp_of_level(1)
    answer, _ = northbound(svc).progress("big", tb, {"worker": "w1", "batch": 185})
    assert answer["changed_rules"] > 0                   # 353 done: 94 MB left < 100 MB
    assert dscps(svc, "big") == (dscp_of_level(0),) * 2
    assert dscps(svc, "small") == (dscp_of_level(1),) * 2


def test_attained_demotes_a_job_that_sent_a_lot():
    svc, tb, ts = two_jobs("attained", attained_base_bytes=4 * MB, attained_factor=4.0)
    assert dscps(svc, "big") == dscps(svc, "small") == (dscp_of_level(0),) * 2
    northbound(svc).progress("big", tb, {"worker": "w0", "batch": 5})     # 4 batches x 2 MB = 8 MB
    assert dscps(svc, "big")[0] == dscp_of_level(1)
    assert dscps(svc, "small")[0] == dscp_of_level(0)


def test_set_rank_switches_the_rule_and_needs_the_admin_token():
    svc, tb, ts = two_jobs("progress")
    northbound(svc).progress("big", tb, {"worker": "w0", "batch": 3})
    northbound(svc).progress("small", ts, {"worker": "w0", "batch": 9})
    with pytest.raises(Refused) as err:
        northbound(svc).set_rank("wrong-token", {"rule": "remaining"})
    assert status_of(err.value) == 401 and svc.rank()["rule"] == "progress"
    # a body of the wrong shape is 400; a well-formed one naming no rule breaks a rule
    # of the service (422, naming the field); neither changes the rule
    for bad, status in (({"rule": "fifo"}, 422), ({"rule": "remaining", "x": 1}, 400),
                        (["remaining"], 400)):
        with pytest.raises(Refused) as err:
            northbound(svc).set_rank(ADMIN, bad)
        assert status_of(err.value) == status and svc.rank()["rule"] == "progress", bad
    answer = northbound(svc).set_rank(ADMIN, {"rule": "remaining"})
    assert answer["previous"] == "progress" and answer["changed_rules"] > 0
    assert dscps(svc, "small") == (dscp_of_level(0),) * 2
    metrics = svc.metrics_text()
    assert 'sluice_rank_rule{rule="remaining"} 1' in metrics
    assert 'sluice_rank_rule{rule="progress"} 0' in metrics
    assert "sluice_rank_changes_total 1" in metrics


def test_rank_over_rest():
    svc, _, _ = two_jobs("progress")
    api = ApiServer(svc, "127.0.0.1", 0).start()
    try:
        anonymous = ControllerClient(api.url)
        assert anonymous.rank()["rule"] == "progress"
        with pytest.raises(ControllerError) as err:
            anonymous.set_rank("remaining")
        assert err.value.status == 401
        admin = ControllerClient(api.url, ADMIN)
        with pytest.raises(ControllerError) as err:
            admin.set_rank("shortest")
        assert err.value.status == 400
        assert admin.set_rank("attained", wait=True)["applied"] is True
        assert anonymous.rank()["rule"] == "attained"
        assert 'sluice_rank_rule{rule="attained"} 1' in anonymous.metrics()
    finally:
        api.stop()


def test_sizes_survive_a_restart(tmp_path):
    state = tmp_path / "state.json"
    svc = bring_up(make_service("two-rack", rank="remaining", state_file=state))
    northbound(svc).register_job(ADMIN, BIG)
    again = make_service("two-rack", rank="remaining", state_file=state)
    big = again.jobs()[0]
    assert big["total_batches"] == 400 and big["bytes_per_batch"] == 2 * MB


def test_the_rule_chosen_at_run_time_survives_a_restart(tmp_path):
    state = tmp_path / "state.json"
    svc = bring_up(make_service("two-rack", rank="remaining", state_file=state))
    northbound(svc).register_job(ADMIN, BIG)
    northbound(svc).set_rank(ADMIN, {"rule": "attained"})
    # restarted without a rule of its own: the one chosen last, and the levels it gives
    again = bring_up(make_service("two-rack", rank=None, state_file=state))
    assert again.rank()["rule"] == "attained"
    assert again.reconciler.levels == svc.reconciler.levels
    # an explicit rule on the command line wins, and is saved in turn
    explicit = make_service("two-rack", rank="progress", state_file=state)
    assert explicit.rank()["rule"] == "progress"
    explicit.save_state()
    assert make_service("two-rack", rank=None, state_file=state).rank()["rule"] == "progress"


def test_a_state_file_without_a_rule_gives_the_default_and_a_bad_one_is_refused(tmp_path):
    import json

    from sluice_common.rank_rules import DEFAULT_RULE
    from sluice_common.errors import InputError

    state = tmp_path / "state.json"
    make_service("two-rack", rank="attained", state_file=state).save_state()
    data = json.loads(state.read_text())
    del data["rank"]                       # written before the rule was saved
    state.write_text(json.dumps(data))
    assert make_service("two-rack", rank=None, state_file=state).rank()["rule"] == DEFAULT_RULE
    data["rank"] = "fastest"
    state.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        make_service("two-rack", rank=None, state_file=state)
    assert "rank" in str(err.value) and "fastest" in str(err.value)
