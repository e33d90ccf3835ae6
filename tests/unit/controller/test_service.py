"""The controller service: registry, progress, rule changes, tokens, state, proxy ARP.
No switch: flow mods land in a FlowTable (TableSink)."""

import json

import pytest
from scapy.layers.l2 import ARP, Ether

from controller import packets
from controller.api import status_of
from controller.errors import Refused
from controller.fabric_events import ROUTES_ACK_TIMEOUT_S
from controller.sinks import TableSink
from support.controller_fakes import ADMIN, make_service, northbound, walk
from controller.fake_fabric import bring_up
from topologies.mininet_topo import mac_of
from topologies.priority_classes import dscp_of_level

JOB_A = {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
         "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001}]}
JOB_B = {"id": "job-b", "servers": [{"id": "s0", "ip": "10.0.0.4", "port": 9100}],
         "workers": [{"id": "w0", "ip": "10.0.0.2", "port": 9101}]}


def setup_two_jobs(**config):
    svc = bring_up(make_service("two-rack", **config))
    ta = northbound(svc).register_job(ADMIN, JOB_A)["token"]
    tb = northbound(svc).register_job(ADMIN, JOB_B)["token"]
    return svc, ta, tb


def push_dscp(svc, job):
    src = {"job-a": "h1", "job-b": "h2"}[job]
    dst, port = {"job-a": ("10.0.0.3", 9000), "job-b": ("10.0.0.4", 9100)}[job]
    end, _, dscp = walk(svc, src, dst, tcp_dst=port)
    assert end in ("h3", "h4")
    return dscp


def pull_dscp(svc, job):
    src = {"job-a": "h3", "job-b": "h4"}[job]
    dst, port = {"job-a": ("10.0.0.1", 9001), "job-b": ("10.0.0.2", 9101)}[job]
    return walk(svc, src, dst, tcp_dst=port)[2]


def test_lagging_job_gets_the_more_urgent_marks_and_flips_with_reports():
    svc, ta, tb = setup_two_jobs()
    northbound(svc).progress("job-a", ta, {"worker": "w0", "batch": 10})
    northbound(svc).progress("job-b", tb, {"worker": "w0", "batch": 3})
    # b lags: b pull (level 0) > b push (1) > a pull (2) > a push (3)
    assert pull_dscp(svc, "job-b") == dscp_of_level(0)
    assert push_dscp(svc, "job-b") == dscp_of_level(1)
    assert pull_dscp(svc, "job-a") == dscp_of_level(2)
    assert push_dscp(svc, "job-a") == dscp_of_level(3)
    northbound(svc).progress("job-b", tb, {"worker": "w0", "batch": 20})
    assert push_dscp(svc, "job-a") == dscp_of_level(1)
    assert push_dscp(svc, "job-b") == dscp_of_level(3)


def test_acks_travel_at_their_flows_level():
    """A TCP flow is only as fast as its ACKs: the reverse direction of each PS
    connection (matched on the listening port as source) carries the flow's level, and
    an ephemeral source port that equals a registered port loses to the data rule."""
    svc, ta, tb = setup_two_jobs()
    northbound(svc).progress("job-a", ta, {"worker": "w0", "batch": 10})
    northbound(svc).progress("job-b", tb, {"worker": "w0", "batch": 3})
    # job-b's pull (10.0.0.4:* -> 10.0.0.2:9101) is ACKed from h2 with source port 9101
    end, _, dscp = walk(svc, "h2", "10.0.0.4", tcp_dst=40000, tcp_src=9101)
    assert (end, dscp) == ("h4", pull_dscp(svc, "job-b")) and dscp == dscp_of_level(0)
    # job-a's push (10.0.0.1:* -> 10.0.0.3:9000) is ACKed from h3 with source port 9000
    assert walk(svc, "h3", "10.0.0.1", tcp_dst=40000, tcp_src=9000)[2] == dscp_of_level(3)
    # the same source port towards another host is not job-a's connection
    assert walk(svc, "h3", "10.0.0.2", tcp_dst=40000, tcp_src=9000)[2] == 0
    # a data packet whose ephemeral source port equals a registered port: data rule wins
    assert walk(svc, "h1", "10.0.0.3", tcp_dst=9000, tcp_src=9101)[2] == dscp_of_level(3)
    northbound(svc).progress("job-b", tb, {"worker": "w0", "batch": 20})
    assert walk(svc, "h2", "10.0.0.4", tcp_dst=40000, tcp_src=9101)[2] == dscp_of_level(2)


def test_a_workers_control_messages_ride_at_its_pull_level():
    """Registered with its ps-lite scheduler (beside the first server), a job's workers'
    messages to the scheduler (and their ACKs) take the level of the worker's pull:
    without it they would wait in the least urgent class at the job's start and end."""
    svc = bring_up(make_service("two-rack"))
    body = {**JOB_B, "scheduler": {"ip": "10.0.0.4", "port": 9199}}
    tb = northbound(svc).register_job(ADMIN, body)["token"]
    ta = northbound(svc).register_job(ADMIN, JOB_A)["token"]
    northbound(svc).progress("job-a", ta, {"worker": "w0", "batch": 10})
    northbound(svc).progress("job-b", tb, {"worker": "w0", "batch": 3})
    level = dscp_of_level(0)                                   # job-b's pull
    assert pull_dscp(svc, "job-b") == level
    assert walk(svc, "h2", "10.0.0.4", tcp_dst=9199)[2] == level        # worker -> scheduler
    assert walk(svc, "h4", "10.0.0.2", tcp_dst=40000, tcp_src=9199)[2] == level   # its ACKs
    assert walk(svc, "h1", "10.0.0.4", tcp_dst=9199)[2] == 0   # not a worker of job-b
    # not a ranked flow: the job's flows and the job-level byte counts are unchanged
    assert len(svc.flows("job-b")["flows"]) == 2
    northbound(svc).progress("job-b", tb, {"worker": "w0", "batch": 20})
    assert walk(svc, "h2", "10.0.0.4", tcp_dst=9199)[2] == pull_dscp(svc, "job-b") \
        == dscp_of_level(2)
    northbound(svc).remove_job(ADMIN, "job-b")
    assert walk(svc, "h2", "10.0.0.4", tcp_dst=9199)[2] == 0


def test_plain_traffic_is_not_marked():
    svc, _, _ = setup_two_jobs()
    assert walk(svc, "h1", "10.0.0.3", tcp_dst=5201)[2] == 0


def test_rules_change_only_when_a_level_changes():
    svc, ta, tb = setup_two_jobs()
    northbound(svc).progress("job-a", ta, {"worker": "w0", "batch": 10})
    northbound(svc).progress("job-b", tb, {"worker": "w0", "batch": 3})
    sent = len(svc.sink.sent)
    # both advance in lock-step: same ranking, no flow mods
    for step in range(1, 6):
        ans, done = northbound(svc).progress("job-a", ta, {"worker": "w0", "batch": 10 + step})
        assert ans["changed_rules"] == 0 and done is None
        northbound(svc).progress("job-b", tb, {"worker": "w0", "batch": 3 + step})
    assert len(svc.sink.sent) == sent
    ans, done = northbound(svc).progress("job-b", tb, {"worker": "w0", "batch": 100})
    assert ans["changed_rules"] == 8 and done.is_set()   # 4 PS flows + their ACKs re-marked
    assert all(m.command == "modify" for m in svc.sink.sent[sent:])


def test_stale_and_repeated_reports_change_nothing():
    svc, ta, _ = setup_two_jobs()
    northbound(svc).progress("job-a", ta, {"worker": "w0", "batch": 10})
    before = (len(svc.sink.sent), svc.jobs())
    for batch in (10, 9, 0):
        ans, _ = northbound(svc).progress("job-a", ta, {"worker": "w0", "batch": batch})
        assert ans["result"] == "stale"
    assert (len(svc.sink.sent), svc.jobs()) == before


def test_job_rules_carry_its_cookie_and_go_when_it_ends():
    svc, _, _ = setup_two_jobs()
    cookie = svc.registry.jobs["job-a"].cookie
    assert len(svc.sink.table.with_cookie(cookie)) == 4      # push + pull + their ACKs
    out = northbound(svc).remove_job(ADMIN, "job-a")
    assert out["removed_rules"] == 4
    assert svc.sink.table.with_cookie(cookie) == []
    assert walk(svc, "h1", "10.0.0.3", tcp_dst=9000)[2] == 0
    assert svc.sink.table.with_cookie(svc.registry.jobs["job-b"].cookie)


# (the service called directly: over HTTP the request model refuses a wrong shape first)
@pytest.mark.parametrize("body, field", [
    ({"id": "x", "servers": [], "workers": JOB_A["workers"]}, "servers"),
    ({"id": "x y", "servers": JOB_A["servers"], "workers": JOB_A["workers"]}, "id"),
    ({"id": "x", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 70000}],
      "workers": JOB_A["workers"]}, "port"),
    ({"id": "x", "servers": JOB_A["servers"], "workers": JOB_A["workers"], "extra": 1}, "extra"),
    ({**JOB_A, "id": "x", "scheduler": {"ip": "10.0.0.3", "port": 0}}, "port"),
])
def test_a_registration_of_the_wrong_shape_is_400_and_changes_nothing(body, field):
    svc = bring_up(make_service())
    rules = dict(svc.sink.table.rules)
    with pytest.raises(Refused) as err:
        northbound(svc).register_job(ADMIN, body)
    assert status_of(err.value) == 400 and field in err.value.reason
    assert svc.jobs() == [] and svc.sink.table.rules == rules


@pytest.mark.parametrize("body, field", [
    ({"id": "x", "servers": [{"id": "s0", "ip": "10.9.9.9", "port": 1}],
      "workers": JOB_A["workers"]}, "servers[0].ip"),
    ({**JOB_A, "id": "x", "scheduler": {"ip": "10.9.9.9", "port": 9}}, "scheduler.ip"),
    ({"id": "x", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000},
                             {"id": "s0", "ip": "10.0.0.4", "port": 9000}],
      "workers": JOB_A["workers"]}, "servers[1].id"),
    ({"id": "x", "servers": JOB_A["servers"],
      "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9101},
                  {"id": "w0", "ip": "10.0.0.2", "port": 9101}]}, "workers[1].id"),
    ({"id": "x", "servers": [{"id": "s0", "ip": "10.0.0.1", "port": 9000}],
      "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9000}]}, "workers[0]"),
])
def test_a_registration_breaking_a_rule_is_422_naming_the_field(body, field):
    """The right shape, a rule no schema says (unique ids, hosts of the topology, each
    endpoint once): one status for all, the field named, nothing changed."""
    svc = bring_up(make_service())
    rules = dict(svc.sink.table.rules)
    with pytest.raises(Refused) as err:
        northbound(svc).register_job(ADMIN, body)
    assert status_of(err.value) == 422 and err.value.field == field, err.value.reason
    assert svc.jobs() == [] and svc.sink.table.rules == rules


def test_conflicts_and_tokens():
    svc, ta, tb = setup_two_jobs()
    with pytest.raises(Refused) as err:
        northbound(svc).register_job(ADMIN, JOB_A)
    assert status_of(err.value) == 409
    with pytest.raises(Refused) as err:
        northbound(svc).register_job(ADMIN, {**JOB_A, "id": "job-c"})       # same flows as job-a
    assert status_of(err.value) == 409 and "job-a" in err.value.reason
    for bad in (None, "", "wrong"):
        with pytest.raises(Refused) as err:
            northbound(svc).register_job(bad, {**JOB_A, "id": "job-d"})
        assert status_of(err.value) == 401
        with pytest.raises(Refused) as err:
            northbound(svc).remove_job(bad, "job-a")
        assert status_of(err.value) == 401
    with pytest.raises(Refused) as err:                       # another job's token
        northbound(svc).progress("job-a", tb, {"worker": "w0", "batch": 1})
    assert status_of(err.value) == 401
    with pytest.raises(Refused) as err:
        northbound(svc).progress("nope", ta, {"worker": "w0", "batch": 1})
    assert status_of(err.value) == 404
    with pytest.raises(Refused) as err:         # the right shape, not a worker of job-a
        northbound(svc).progress("job-a", ta, {"worker": "w9", "batch": 1})
    assert status_of(err.value) == 422 and err.value.field == "worker"
    assert [j["batches"] for j in svc.jobs()] == [{}, {}]
    assert sorted(j["id"] for j in svc.jobs()) == ["job-a", "job-b"]


def test_rate_limit_per_job():
    now = [0.0]
    svc = bring_up(make_service(rate_per_s=5))
    svc.clock = lambda: now[0]
    tok = northbound(svc).register_job(ADMIN, JOB_A)["token"]
    for b in range(1, 6):
        northbound(svc).progress("job-a", tok, {"worker": "w0", "batch": b})
    with pytest.raises(Refused) as err:
        northbound(svc).progress("job-a", tok, {"worker": "w0", "batch": 6})
    assert status_of(err.value) == 429
    assert svc.registry.jobs["job-a"].batches == {"w0": 5}
    now[0] += 1.0
    northbound(svc).progress("job-a", tok, {"worker": "w0", "batch": 6})
    assert svc.registry.jobs["job-a"].batches == {"w0": 6}


def test_state_file_restores_jobs_tokens_and_batches(tmp_path):
    path = tmp_path / "state.json"
    svc = bring_up(make_service(state_file=path))
    body = {**JOB_A, "scheduler": {"id": "scheduler", "ip": "10.0.0.3", "port": 9099}}
    tok = northbound(svc).register_job(ADMIN, body)["token"]
    northbound(svc).progress("job-a", tok, {"worker": "w0", "batch": 7})
    svc.save_state()
    assert tok not in path.read_text()                   # only its hash is stored
    again = bring_up(make_service(state_file=path))
    assert again.registry.jobs["job-a"].batches == {"w0": 7}
    assert again.registry.jobs["job-a"].cookie == svc.registry.jobs["job-a"].cookie
    ans, _ = northbound(again).progress("job-a", tok, {"worker": "w0", "batch": 8})
    assert ans["result"] == "accepted"
    assert walk(again, "h1", "10.0.0.3", tcp_dst=9000)[2] != 0
    assert again.registry.jobs["job-a"].scheduler == svc.registry.jobs["job-a"].scheduler
    assert walk(again, "h1", "10.0.0.3", tcp_dst=9099)[2] != 0     # its control channel too


def test_bad_state_file_refuses_to_start(tmp_path):
    from sluice_common.errors import InputError
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"version": 1, "jobs": [{"id": "a", "servers": [],
                                                        "workers": []}]}))
    with pytest.raises(InputError) as err:
        make_service(state_file=path)
    assert str(path) in str(err.value)


# ---- proxy ARP, with frames crafted by scapy ------------------------------------------

def arp_in(op, src_mac, src_ip, dst_ip):
    frame = bytes(Ether(src=src_mac, dst="ff:ff:ff:ff:ff:ff") /
                  ARP(op=op, hwsrc=src_mac, psrc=src_ip, pdst=dst_ip))
    return packets.classify(frame)


def arp_out(svc, dpid, port, frame) -> list:
    """The packet-outs the service sends for one ARP packet-in."""
    before = len(svc.sink.frames)
    svc.on_arp(dpid, port, frame)
    return svc.sink.frames[before:]


def test_proxy_arp_answers_from_what_it_learned():
    svc = bring_up(make_service("two-rack"))
    h1_mac, h4_mac = mac_of("10.0.0.1"), mac_of("10.0.0.4")
    outs = arp_out(svc, 1, 1, arp_in(1, h1_mac, "10.0.0.1", "10.0.0.4"))
    assert len(outs) == 1
    dpid, port, frame = outs[0]
    assert (dpid, port) == (1, 1)               # back out of the asking port only
    reply = Ether(frame)
    assert reply[ARP].op == 2 and reply[ARP].hwsrc == h4_mac and reply[ARP].psrc == "10.0.0.4"
    assert reply.dst == h1_mac


def test_unknown_target_is_probed_then_asker_answered():
    svc = bring_up(make_service("two-rack"), hosts=False)
    h1_mac, h4_mac = mac_of("10.0.0.1"), mac_of("10.0.0.4")
    outs = arp_out(svc, 1, 1, arp_in(1, h1_mac, "10.0.0.1", "10.0.0.4"))
    tor2 = svc.fabric.dpid_of_name["tor2"]
    assert outs and all(d == tor2 for d, _, _ in outs)     # probes only at h4's ToR...
    assert all(not svc.fabric.is_link_port(d, p) for d, p, _ in outs)   # ...edge ports
    probe = Ether(outs[0][2])
    assert probe[ARP].pdst == "10.0.0.4" and probe[ARP].psrc == "0.0.0.0"
    # h4 answers the probe on tor2 port 2 -> learned, and h1 gets its answer
    outs = arp_out(svc, tor2, 2, arp_in(2, h4_mac, "10.0.0.4", "0.0.0.0"))
    assert [(d, p) for d, p, _ in outs] == [(1, 1)]
    assert Ether(outs[0][2])[ARP].hwsrc == h4_mac
    assert svc.fabric.hosts["10.0.0.4"].port == 2


class BarrierHeldSink(TableSink):
    """Switches that apply flow mods but answer barriers only when told to; they hold
    what ``before`` (the service's sink so far) was sent."""

    def __init__(self, before: TableSink) -> None:
        super().__init__()
        self.table, self.sent, self.frames = before.table, before.sent, before.frames
        self.unanswered: list = []

    def send(self, mods, on_done=None) -> None:
        super().send(mods)
        if on_done:
            self.unanswered.append(on_done)

    def answer_barriers(self) -> None:
        done, self.unanswered = self.unanswered, []
        for on_done in done:
            on_done()


def test_arp_is_answered_only_once_the_switches_confirmed_the_routes():
    """The answer invites the asker's first packet; unknown IPv4 is dropped, so the
    answer waits for the barrier replies after the target's routes."""
    svc = bring_up(make_service("two-rack"), hosts=False)
    sink = svc.sink = BarrierHeldSink(svc.sink)
    tor2 = svc.fabric.dpid_of_name["tor2"]
    svc.on_arp(1, 1, arp_in(1, mac_of("10.0.0.1"), "10.0.0.1", "10.0.0.4"))
    sink.answer_barriers()                    # h1's own routes
    sent = len(sink.frames)
    svc.on_arp(tor2, 2, arp_in(2, mac_of("10.0.0.4"), "10.0.0.4", "0.0.0.0"))
    assert sink.frames[sent:] == [] and sink.unanswered       # h4's routes in flight
    sink.answer_barriers()
    answers = sink.frames[sent:]
    assert [(d, p) for d, p, _ in answers] == [(1, 1)]
    assert walk(svc, "h1", "10.0.0.4")[0] == "h4"           # the path it invites exists
    assert walk(svc, "h4", "10.0.0.1")[0] == "h1"


def test_arp_waits_for_a_path_both_ways():
    """Hosts located before the links between their racks are found: no answer until the
    fabric connects them (the asker's ARP retries are not needed, the answer follows)."""
    svc = bring_up(make_service("two-rack"), links=False)
    outs = arp_out(svc, 1, 1, arp_in(1, mac_of("10.0.0.1"), "10.0.0.1", "10.0.0.4"))
    assert outs == []
    bring_up(svc, hosts=False)                 # LLDP finds the links
    answers = svc.sink.frames[-1:]
    assert [(d, p) for d, p, _ in answers] == [(1, 1)]
    assert Ether(answers[0][2])[ARP].psrc == "10.0.0.4"


def test_unconfirmed_routes_hold_answers_back_only_for_a_while():
    """A switch that never answers its barrier (gone mid-change) must not silence proxy
    ARP for good: after ROUTES_ACK_TIMEOUT_S the next tick answers."""
    now = [0.0]
    svc = bring_up(make_service("two-rack"), hosts=False)
    svc.clock = lambda: now[0]
    sink = svc.sink = BarrierHeldSink(svc.sink)
    svc.host_seen("10.0.0.4", svc.fabric.dpid_of_name["tor2"], 2, mac_of("10.0.0.4"))
    outs = arp_out(svc, 1, 1, arp_in(1, mac_of("10.0.0.1"), "10.0.0.1", "10.0.0.4"))
    assert outs == [] and sink.unanswered
    now[0] += ROUTES_ACK_TIMEOUT_S / 2
    svc.tick()
    assert len(sink.frames) == 0
    now[0] += ROUTES_ACK_TIMEOUT_S
    svc.tick()
    assert [(d, p) for d, p, _ in sink.frames] == [(1, 1)]


def test_spoofed_or_misplaced_arp_is_not_learned():
    svc = bring_up(make_service("two-rack"), hosts=False)
    # 10.0.0.4 lives in rack2; an ARP claiming it from tor1 is ignored
    svc.on_arp(1, 1, arp_in(1, "02:00:00:00:00:99", "10.0.0.4", "10.0.0.1"))
    assert "10.0.0.4" not in svc.fabric.hosts
    # ... and never answered, even once both hosts are located
    bring_up(svc)
    assert [(d, p) for d, p, frame in svc.sink.frames if Ether(frame)[ARP].op == 2] == []
    # our own probe looping back is ignored
    assert arp_out(svc, 1, 3, packets.classify(packets.arp_probe("10.0.0.2"))) == []


def test_malformed_frames_are_classified_not_raised():
    assert isinstance(packets.classify(b""), packets.Malformed)
    assert isinstance(packets.classify(bytes(Ether(type=0x0806) / b"\x00\x01")),
                      packets.Malformed)
    lldp = packets.classify(packets.lldp_frame(0x1234, 7, "02:00:00:00:00:01"))
    assert lldp == packets.LldpIn(0x1234, 7)
    assert isinstance(packets.classify(bytes(Ether(type=0x88cc) / b"junk")), packets.Malformed)


def test_workers_sharing_a_host_share_the_push_rule_at_the_more_urgent_level():
    svc = bring_up(make_service("two-rack"))
    job = {"id": "j", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
           "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001},
                       {"id": "w1", "ip": "10.0.0.1", "port": 9002}]}
    tok = northbound(svc).register_job(ADMIN, job)["token"]
    northbound(svc).progress("j", tok, {"worker": "w0", "batch": 9})     # w1 (batch 0) lags
    # both push flows are h1 -> h3:9000: one rule, at w1's (more urgent) push level
    levels = {(f["worker"], f["kind"]): f["level"] for f in svc.flows()["flows"]}
    assert levels[("w1", "push")] < levels[("w0", "push")]
    assert walk(svc, "h1", "10.0.0.3", tcp_dst=9000)[2] == dscp_of_level(levels[("w1", "push")])
    # pull flows go to distinct worker ports: one rule each, at their own levels
    assert walk(svc, "h3", "10.0.0.1", tcp_dst=9001)[2] == dscp_of_level(levels[("w0", "pull")])
    assert walk(svc, "h3", "10.0.0.1", tcp_dst=9002)[2] == dscp_of_level(levels[("w1", "pull")])


def test_a_job_registered_again_gets_a_new_token_and_a_full_bucket():
    now = [0.0]
    svc = bring_up(make_service(rate_per_s=2))
    svc.clock = lambda: now[0]
    guard = northbound(svc)
    old = guard.register_job(ADMIN, JOB_A)["token"]
    for b in (1, 2):
        guard.progress("job-a", old, {"worker": "w0", "batch": b})
    with pytest.raises(Refused) as err:
        guard.progress("job-a", old, {"worker": "w0", "batch": 3})
    assert status_of(err.value) == 429
    guard.remove_job(ADMIN, "job-a")
    new = guard.register_job(ADMIN, JOB_A)["token"]
    with pytest.raises(Refused) as err:
        guard.progress("job-a", old, {"worker": "w0", "batch": 3})
    assert status_of(err.value) == 401
    for b in (1, 2):            # the same instant: a fresh bucket, not the old empty one
        assert guard.progress("job-a", new, {"worker": "w0", "batch": b})[0]["result"] == "accepted"


def _job_rules(svc, job_id):
    return svc.sink.table.with_cookie(svc.registry.jobs[job_id].cookie)


def _ips_in(rules):
    return {v for r in rules for k, v in r.match if k in ("ipv4_src", "ipv4_dst")}


def test_a_migrated_job_leaves_exactly_the_new_placements_rules():
    """Migration: a job moved (suspended on h1 -> h3, resumed on h2 -> h4) is removed and
    registered again, as the run loop does. The removal's one reconcile deletes every
    rule of the old flows and nothing else; the registration's one reconcile installs
    the new flows' rules; nothing of the old placement stays, and the other job's
    rules are untouched throughout."""
    svc = bring_up(make_service("two-rack"))
    guard = northbound(svc)
    guard.register_job(ADMIN, JOB_A)
    other = {"id": "job-c", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9200}],
             "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9201}]}
    guard.register_job(ADMIN, other)
    before_other = set(_job_rules(svc, "job-c"))
    old = _job_rules(svc, "job-a")
    assert len(old) == 4 and _ips_in(old) == {"10.0.0.1", "10.0.0.3"}   # push, pull, ACKs
    sent = len(svc.sink.sent)
    assert guard.remove_job(ADMIN, "job-a")["removed_rules"] == 4
    removal = svc.sink.sent[sent:]
    assert sorted(m.command for m in removal) == ["delete"] * 4
    assert {m.rule for m in removal} == set(old)
    moved = {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.4", "port": 9000}],
             "workers": [{"id": "w0", "ip": "10.0.0.2", "port": 9001}]}
    sent = len(svc.sink.sent)
    guard.register_job(ADMIN, moved)
    install = svc.sink.sent[sent:]
    new = _job_rules(svc, "job-a")
    assert sorted(m.command for m in install) == ["add"] * 4 and {m.rule for m in install} == set(new)
    assert _ips_in(new) == {"10.0.0.2", "10.0.0.4"}
    assert not any(r in svc.sink.table.rules.values() for r in old)
    assert set(_job_rules(svc, "job-c")) == before_other
    # the new path is marked, the old one (h1 -> 10.0.0.3:9000) is plain traffic now
    assert walk(svc, "h2", "10.0.0.4", tcp_dst=9000)[2] != 0
    assert walk(svc, "h1", "10.0.0.3", tcp_dst=9000)[2] == 0
