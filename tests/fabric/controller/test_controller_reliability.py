"""Controller reliability: a SIGKILLed controller process restarted on its state file
(switches keep forwarding meanwhile; on reconnect the controller reads each switch's
table back and sends only the difference, so not one packet is lost), a single switch
losing and regaining its controller, a controller restart under a real running PS job,
and malformed frames reaching the controller as packet-ins.

All of them need Open vSwitch (root + OVS + Mininet, via mininet_fabric/fabric.py and its
global lock); the in-process reconcile-core and fuzz tests are
tests/unit/controller/test_reconcile.py and tests/unit/controller/test_api_fuzz.py.
"""

from __future__ import annotations

import re
import signal
import statistics
import subprocess
import sys
import time

import pytest

from controller.client import ControllerClient
from support.controller_api import RESTART_JOB
from ps_runtime.ports import free_port
from support.controller_process import dscp_marks, stop, wait_located
from support.controller_process import start_controller as start_fabric_controller
from topologies.priority_classes import dscp_of_level

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
