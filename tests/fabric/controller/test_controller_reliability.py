"""Controller reliability: a SIGKILLed controller process restarted on its state file
(switches keep forwarding meanwhile; on reconnect the controller reads each switch's
table back and sends only the difference, so not one packet is lost), a single switch
losing and regaining its controller, a controller restart under a real running PS job,
the northbound API under fuzzed bodies, and malformed frames reaching the controller as
packet-ins.

Tests needing Open vSwitch are fabric-marked (root + OVS + Mininet, via
mininet_fabric/fabric.py and its global lock); the reconcile-core and fuzz tests are
in-process and fast.
"""

from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from controller.api import ApiServer
from controller.client import ControllerClient
from controller.rules import COOKIE_FORWARDING, FlowMod, Rule
from controller.service import SETTLE_S, ControllerConfig, ControllerService, TableSink
from support.controller_fakes import ADMIN as FAKE_ADMIN, bring_up, make_service, northbound, walk
from support.controller_api import JOB as API_JOB, raw
from ps_runtime.ports import free_port
from support.controller_process import dscp_marks, stop, wait_located
from support.controller_process import start_controller as start_fabric_controller
from topologies.priority_classes import dscp_of_level

RESTART_JOB = {"id": "job-r", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
               "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001}]}
STALE_COOKIE = 0x5EA1DEAD            # a rule the controller never made


# ============================================================ controller restart ====
def start_controller(ofp: int, api: int, state_file: str, log):
    # --rank progress: the marks these tests expect are the per-flow progress levels
    return start_fabric_controller("two-rack", ofp, api, log, "--state-file", state_file,
                                   "--rank", "progress")


def ping_ok(fab, src: str, dst: str) -> tuple[bool, str]:
    out = fab.cmd(src, f"ping -c2 -W1 -i0.2 {fab.ip(dst)}")
    return bool(re.search(r" 0% packet loss", out)), out


def cookies_on(fab, switch: str) -> set[int]:
    return {int(c, 16) for c in re.findall(r"cookie=0x([0-9a-f]+)", fab.dump_flows(switch))}


@pytest.mark.fabric
def test_controller_sigkill_and_restart_reconciles(tmp_path):
    from mininet_fabric.fabric import Fabric

    ofp, api = free_port(), free_port()
    state = str(tmp_path / "controller-state.json")
    log = open(tmp_path / "controller.log", "w+")
    proc, client = start_controller(ofp, api, state, log)
    try:
        with Fabric("two-rack", controller=f"127.0.0.1:{ofp}") as fab:
            wait_located(client, 4)
            answer = client.register_job(RESTART_JOB)
            token, cookie = answer["token"], int(answer["cookie"], 16)
            assert client.progress("job-r", "w0", 5, token, wait=True)["result"] == "accepted"
            # the only job: its pull flow is level 0 (marked at the server's ToR),
            # its push flow level 1 (marked at the worker's ToR)
            expected = {"tor1": {dscp_of_level(1)}, "tor2": {dscp_of_level(0)}}
            for tor, marks in expected.items():
                assert dscp_marks(fab, tor).get(cookie) == marks, fab.dump_flows(tor)
            ok, out = ping_ok(fab, "h1", "h3")      # also warms the hosts' ARP caches
            assert ok, out

            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            # fail-mode secure: installed rules stay and keep forwarding
            ok, out = ping_ok(fab, "h1", "h3")
            assert ok, f"no forwarding while the controller is down:\n{out}"
            for tor, marks in expected.items():
                assert dscp_marks(fab, tor).get(cookie) == marks, fab.dump_flows(tor)
            subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flow", "tor1",
                            f"cookie={STALE_COOKIE:#x},priority=7,udp,tp_dst=4242,"
                            "actions=drop"], check=True, timeout=30)
            assert STALE_COOKIE in cookies_on(fab, "tor1")

            # 4 s of pings every 0.1 s across the restart and the switches' reconnect
            pinger = fab.popen("h1", "ping", "-c", "40", "-i", "0.1", "-W", "1", fab.ip("h3"),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            t0 = time.monotonic()
            proc, client = start_controller(ofp, api, state, log)
            t_api = time.monotonic() - t0
            assert [j["id"] for j in client.jobs()] == ["job-r"]
            # every acknowledged report was journaled before its answer
            assert client.jobs()[0]["batches"] == {"w0": 5}
            deadline = time.monotonic() + 20
            while True:
                current = {tor: dscp_marks(fab, tor).get(cookie) for tor in expected}
                stale = STALE_COOKIE in cookies_on(fab, "tor1")
                if current == expected and not stale:
                    break
                assert time.monotonic() < deadline, (
                    f"no reconcile within 20 s: marks {current}, stale rule present: {stale}"
                    f"\n{fab.dump_flows('tor1')}")
                time.sleep(0.1)
            t_reconciled = time.monotonic() - t0
            # the switches were reconciled, not cleared: not one ping lost
            pings = pinger.communicate(timeout=30)[0]
            assert " 0% packet loss" in pings, f"forwarding broke across the restart:\n{pings}"
            # and the new controller finds every host again (ARP probes) and forwards
            wait_located(client, 4, timeout=20)
            t_located = time.monotonic() - t0
            deadline = time.monotonic() + 10
            while not (res := ping_ok(fab, "h1", "h3"))[0]:
                assert time.monotonic() < deadline, (
                    f"no forwarding 10 s after the restart:\n{res[1]}\n{fab.dump_flows('tor1')}")
            t_forwarding = time.monotonic() - t0
            # the persisted job token still works
            assert client.progress("job-r", "w0", 6, token)["result"] == "accepted"
            print(f"\nrestart: API up {t_api:.2f} s, job rules reinstalled and stale rule "
                  f"cleared {t_reconciled:.2f} s, all hosts located {t_located:.2f} s, "
                  f"h1->h3 ping without loss {t_forwarding:.2f} s after the restart",
                  file=sys.stderr)
    finally:
        stop(proc)
        log.close()


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


def vsctl(*args: str) -> None:
    subprocess.run(["ovs-vsctl", *args], check=True, timeout=30)


@pytest.mark.fabric
def test_switch_reconnect_reconciles_within_2s(tmp_path):
    """One switch loses its controller and comes back: it forwards on its installed rules
    meanwhile (fail-mode secure), and within 2 s of reconnecting a rule added by hand is
    gone and the registered job's rules are back."""
    from mininet_fabric.fabric import Fabric

    ofp, api = free_port(), free_port()
    log = open(tmp_path / "controller.log", "w+")
    proc, client = start_controller(ofp, api, str(tmp_path / "state.json"), log)
    try:
        with Fabric("two-rack", controller=f"127.0.0.1:{ofp}") as fab:
            wait_located(client, 4)
            assert counter(client, "sluice_switches_connected") == 3
            answer = client.register_job(RESTART_JOB)
            cookie = int(answer["cookie"], 16)
            assert client.progress("job-r", "w0", 5, answer["token"],
                                   wait=True)["result"] == "accepted"
            push_mark = {dscp_of_level(1)}             # push flow, marked at h1's ToR
            assert dscp_marks(fab, "tor1").get(cookie) == push_mark, fab.dump_flows("tor1")
            ok, out = ping_ok(fab, "h1", "h3")
            assert ok, out

            # Cut tor1's control channel by pointing it at a port nobody listens on.
            # (`ovs-vsctl del-controller` is no disconnect: OVS flushes a bridge's flows
            # when it goes from having a controller to having none, measured on OVS 3.1.)
            vsctl("set-controller", "tor1", f"tcp:127.0.0.1:{free_port()}")
            deadline = time.monotonic() + 10
            while counter(client, "sluice_switches_connected") != 2:   # of 3 in two-rack
                assert time.monotonic() < deadline, "the controller never saw tor1 go"
                time.sleep(0.1)
            t_gone = 10 - (deadline - time.monotonic())
            ok, out = ping_ok(fab, "h1", "h3")
            assert ok, (f"tor1 stopped forwarding without its controller:\n{out}\n"
                        f"{fab.dump_flows('tor1')}\n{fab.dump_flows('tor2')}")
            subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flow", "tor1",
                            f"cookie={STALE_COOKIE:#x},priority=7,udp,tp_dst=4242,"
                            "actions=drop"], check=True, timeout=30)
            assert STALE_COOKIE in cookies_on(fab, "tor1")

            vsctl("set-controller", "tor1", f"tcp:127.0.0.1:{ofp}")
            t0 = time.monotonic()
            deadline = t0 + 2.0
            while True:
                mark = dscp_marks(fab, "tor1").get(cookie)
                stale = STALE_COOKIE in cookies_on(fab, "tor1")
                if mark == push_mark and not stale:
                    break
                assert time.monotonic() < deadline, (
                    f"tor1 not reconciled 2 s after reconnect: job marks {mark}, stale rule "
                    f"present: {stale}\n{fab.dump_flows('tor1')}")
                time.sleep(0.05)
            t_reconciled = time.monotonic() - t0
            deadline = time.monotonic() + 10
            while not (res := ping_ok(fab, "h1", "h3"))[0]:
                assert time.monotonic() < deadline, (
                    f"no forwarding 10 s after tor1 reconnected:\n{res[1]}")
            print(f"\nswitch reconnect: controller saw tor1 go after {t_gone:.2f} s, tor1 reconciled {t_reconciled:.2f} s after "
                  f"set-controller, h1->h3 ping without loss "
                  f"{time.monotonic() - t0:.2f} s after", file=sys.stderr)
    finally:
        stop(proc)
        log.close()


# ============================================================ restart under a PS job =
PS_BATCHES = 30


@pytest.mark.fabric
def test_controller_restart_during_a_running_ps_job(tmp_path):
    """A real PS job (smallcnn, server h1, workers h2 and h3 across the spine) registered
    with the controller; the controller is SIGKILLed mid-job and restarted on its state
    file. The job must finish every batch with exit 0, and its rules must be back."""
    from sluice_common.jobspec import JobSpec
    from mininet_fabric.fabric import Fabric
    from ps_runtime.launcher import PSJob, WorkerOptions
    from ps_runtime.plan import HostPlan
    from ps_runtime.runners import MininetRunner

    spec = JobSpec(name="restart-ps", model="smallcnn", dataset_size=4096, epochs=1,
                   batch_size=32, max_gpus=2)
    ofp, api = free_port(), free_port()
    state = str(tmp_path / "controller-state.json")
    log = open(tmp_path / "controller.log", "w+")
    proc, client = start_controller(ofp, api, state, log)
    try:
        with Fabric("two-rack", controller=f"127.0.0.1:{ofp}", progress=False) as fab:
            wait_located(client, 4)
            placement = HostPlan.on_hosts(fab.topology, ["h1"], ["h2", "h3"])
            # Progress reports would come from the workers, but the API listens on the
            # root namespace's loopback, out of the hosts' reach: the test reports instead.
            job = PSJob(spec, placement, MininetRunner(fab), tmp_path / "job",
                        batches=PS_BATCHES, options=WorkerOptions(threads=1))
            # wait=1: the marks are checked right below (on a loaded machine the rules
            # can land after the first flow-table dump otherwise)
            answer = client.register_job(job.registration(), wait=True)
            token, cookie = answer["token"], int(answer["cookie"], 16)
            # push flows enter at the workers' ToRs (h2: tor1, h3: tor2), pull flows at
            # the server's (tor1): every ToR carries marking rules of the job
            for worker in ("w0", "w1"):
                assert client.progress(spec.name, worker, 0, token,
                                       wait=True)["result"] == "accepted"
            assert all(cookie in dscp_marks(fab, t) for t in ("tor1", "tor2")), \
                fab.dump_flows("tor1") + fab.dump_flows("tor2")
            restart = {}

            def on_batch(worker, rec):
                nonlocal proc, client
                if worker == 0 and rec.batch == 5 and not restart:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(timeout=10)
                    t0 = time.monotonic()
                    proc, client = start_controller(ofp, api, state, log)
                    restart["api_s"] = time.monotonic() - t0
                    restart["t0"] = t0
                    restart["job_running"] = job.poll() is False

            with job:
                job.start()
                result = job.wait(timeout=240, on_batch=on_batch)
            assert restart, "the job ended before worker 0 reached batch 5"
            assert restart["job_running"], "the job ended while the controller restarted"
            assert result.returncodes and set(result.returncodes.values()) == {0}, \
                result.returncodes
            for worker in (0, 1):
                assert len(result.batches[worker]) == PS_BATCHES, result.batches[worker][-3:]
            assert [j["id"] for j in client.jobs()] == [spec.name]
            assert client.progress(spec.name, "w0", PS_BATCHES, token)["result"] == "accepted"
            deadline = time.monotonic() + 10
            while not all(cookie in dscp_marks(fab, t) for t in ("tor1", "tor2")):
                assert time.monotonic() < deadline, (
                    f"job rules missing after the restart:\n{fab.dump_flows('tor1')}\n"
                    f"{fab.dump_flows('tor2')}")
                time.sleep(0.1)
            times = [r.time_s for w in (0, 1) for r in result.batches[w]]
            slowest = max(times)
            print(f"\nPS job across a controller restart: API back after "
                  f"{restart['api_s']:.2f} s, job of {PS_BATCHES} batches took "
                  f"{result.elapsed_s:.1f} s, slowest batch {slowest:.2f} s (median "
                  f"{statistics.median(times):.2f} s)", file=sys.stderr)
    finally:
        stop(proc)
        log.close()


# ============================================================ API body fuzzing ======
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                   max_size=4),
    max_leaves=12)
ENDPOINT = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=6), JSON), "ip": st.sampled_from(
        ["10.0.0.1", "10.0.0.3", "10.0.0.9", "1.2.3", "", "10.0.0.256"]) | JSON,
     "port": st.integers(-5, 70000) | JSON})
JOB_LIKE = st.fixed_dictionaries(
    {"id": st.from_regex(r"[A-Za-z0-9._-]{0,70}", fullmatch=True) | JSON},
    optional={"servers": st.lists(ENDPOINT, max_size=3) | JSON,
              "workers": st.lists(ENDPOINT, max_size=3) | JSON, "extra": JSON})
PROGRESS_LIKE = st.fixed_dictionaries(
    {}, optional={"worker": st.sampled_from(["w0", "w1", "w9", ""]) | JSON,
                  "batch": st.integers(-3, 2**70) | st.floats() | JSON, "extra": JSON})


def encode(value) -> bytes:
    return json.dumps(value).encode()


# near-valid bodies too, so that the accepting paths (and 409) are exercised
VALID_PROGRESS = st.fixed_dictionaries({"worker": st.sampled_from(["w0", "w1"]),
                                        "batch": st.integers(0, 10**6)})
VALID_JOB = st.builds(
    lambda job_id, port, n: {"id": job_id,
                             "servers": [{"id": "s0", "ip": "10.0.0.4", "port": port}],
                             "workers": [{"id": f"w{i}", "ip": f"10.0.0.{i + 1}", "port": port}
                                         for i in range(n)]},
    st.sampled_from(["job-a", "job-b", "j.1", "x" * 64, "x" * 65]),
    st.integers(10000, 60000), st.integers(0, 2))
BODY = st.one_of(JSON.map(encode), JOB_LIKE.map(encode), PROGRESS_LIKE.map(encode),
                 VALID_PROGRESS.map(encode), VALID_JOB.map(encode), st.binary(max_size=200),
                 VALID_PROGRESS.map(encode), VALID_JOB.map(encode))
ALLOWED = {200, 201, 400, 401, 404, 409, 413, 429}


@pytest.fixture(scope="module")
def fuzz_api():
    svc = bring_up(make_service("two-rack", rate_per_s=1e6))
    api = ApiServer(svc, "127.0.0.1", 0).start()
    token = ControllerClient(api.url, FAKE_ADMIN).register_job(API_JOB)["token"]
    yield api, token
    api.stop()


def jobs_state(api) -> list:
    status, data = raw(api, "GET", "/jobs")
    assert status == 200
    return json.loads(data)["jobs"]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(target=st.sampled_from(["/jobs", "/jobs/job-a/progress", "/jobs/nope/progress"]),
       body=BODY, auth=st.sampled_from(["good", "good", "good", "none", "bad"]))
def test_fuzzed_bodies_never_break_the_api(fuzz_api, target, body, auth):
    api, job_token = fuzz_api
    token = {"good": FAKE_ADMIN if target == "/jobs" else job_token, "none": None,
             "bad": "not-a-token"}[auth]
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    before = jobs_state(api)
    # raw() opens a fresh connection; a dropped connection raises here and fails the test
    status, data = raw(api, "POST", target, body, headers)
    event(f"{target} -> {status}")     # --hypothesis-show-statistics shows the mix
    assert status in ALLOWED, (status, data)
    answer = json.loads(data)           # every answer, refusals included, is JSON
    after = jobs_state(api)
    if status >= 300:
        assert after == before, (status, answer)
        assert answer["status"] == status and answer["error"]
    elif target == "/jobs":            # a fuzzed body that happens to be a valid job
        assert answer["id"] in [j["id"] for j in after]
        assert raw(api, "DELETE", f"/jobs/{answer['id']}",
                   headers={"Authorization": f"Bearer {FAKE_ADMIN}"})[0] == 200
        assert jobs_state(api) == before
    else:                              # a valid progress report: only job-a's batches moved
        assert [j["id"] for j in after] == [j["id"] for j in before]


# ============================================================ malformed packets =====
# Sent from h1 with scapy. Only ARP and LLDP reach the controller (table-miss drops);
# these four kinds must each be counted as malformed, the odd ones must not hurt.
FRAMES_SCRIPT = r'''
import sys
from scapy.all import ARP, IP, Ether, sendp
iface, mac, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
bcast, lldp = "ff:ff:ff:ff:ff:ff", "01:80:c2:00:00:0e"
malformed = [
    Ether(dst=bcast, src=mac, type=0x0806) / b"\x00\x01\x08\x00",             # truncated ARP
    Ether(dst=bcast, src=mac) / ARP(op=9, psrc="10.0.0.1", pdst="10.0.0.3"),  # bad opcode
    Ether(dst=lldp, src=mac, type=0x88cc) / b"\x02\x07garbagegarbage",        # bad LLDP TLV
    Ether(dst=lldp, src=mac, type=0x88cc) / b"\x02",                          # truncated LLDP
]
odd = [
    Ether(dst=bcast, src=mac) / ARP(hwlen=3, plen=9, op=1, psrc="10.0.0.1", pdst="10.0.0.3"),
    Ether(dst=bcast, src=mac, type=0x0800) / b"\x45\x00",                     # truncated IPv4
    Ether(dst=bcast, src=mac, type=0x88b5) / b"local experimental ethertype",
    Ether(dst=bcast, src=mac) / IP(dst="10.0.0.3", options=b"\x07\x03\x04\x00"),
]
sendp(malformed * n + odd * n, iface=iface, verbose=False)
print("sent", len(malformed) * n, "malformed")
'''


def counter(client: ControllerClient, name: str) -> int:
    m = re.search(rf"^{name} (\d+)", client.metrics(), re.M)
    return int(m.group(1)) if m else 0


@pytest.mark.fabric
def test_malformed_packet_ins_are_counted_and_harmless(tmp_path):
    from mininet_fabric.fabric import Fabric

    script = tmp_path / "frames.py"
    script.write_text(FRAMES_SCRIPT)
    python = sys.executable
    ofp, api = free_port(), free_port()
    log = open(tmp_path / "controller.log", "w+")
    proc, client = start_controller(ofp, api, str(tmp_path / "state.json"), log)
    try:
        with Fabric("two-rack", controller=f"127.0.0.1:{ofp}") as fab:
            wait_located(client, 4)
            before = counter(client, "sluice_malformed_packets_total")
            intf = fab.host("h1").defaultIntf()
            n = 5
            out = fab.cmd("h1", f"{python} {script} {intf.name} {intf.MAC()} {n}")
            assert f"sent {4 * n} malformed" in out, out
            deadline = time.monotonic() + 15
            while counter(client, "sluice_malformed_packets_total") - before < 4 * n:
                assert proc.poll() is None, "the controller died on malformed packets"
                assert time.monotonic() < deadline, (
                    f"malformed packets not counted (sent {4 * n}):\n{client.metrics()}")
                time.sleep(0.1)
            assert proc.poll() is None and client.health()
            assert re.search(r"^sluice_hosts_located 4\b", client.metrics(), re.M), \
                client.metrics()
            # still forwarding, IP options (record route) included
            out = fab.cmd("h1", f"ping -R -c2 -W1 -i0.2 {fab.ip('h3')}")
            assert " 0% packet loss" in out, out
            # and still answering the API like before
            answer = client.register_job(RESTART_JOB)
            assert client.progress("job-r", "w0", 1, answer["token"])["result"] == "accepted"
            cookie, deadline = int(answer["cookie"], 16), time.monotonic() + 10
            while dscp_marks(fab, "tor1").get(cookie) != {dscp_of_level(1)}:
                assert time.monotonic() < deadline, fab.dump_flows("tor1")
                time.sleep(0.1)
    finally:
        stop(proc)
        log.close()
    assert proc.returncode == 0, "the controller did not stop cleanly"
