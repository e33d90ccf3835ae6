"""The controller for real: a `sluice controller` PROCESS driving Open vSwitch switches of
the Mininet fabric harness (mininet_fabric/fabric.py, which holds the global fabric lock).
Needs root and OVS; fails loudly otherwise (never skipped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from mininet_fabric.fabric import Fabric
from topologies.priority_classes import dscp_of_level
from ps_runtime.ports import free_port

pytestmark = pytest.mark.fabric

from support.paths import REPO as ROOT
from support.controller_process import (ADMIN, SLUICE, dscp_marks, start_controller, stop,
                                        wait_located)
@contextmanager
def controller(topology: str, *extra: str):
    ofp, api = free_port(), free_port()
    log = open(f"/tmp/sluice-controller-test-{os.getpid()}.log", "w+")
    proc, client = start_controller(topology, ofp, api, log, *extra)
    try:
        yield f"127.0.0.1:{ofp}", client
    finally:
        stop(proc)
        log.close()
    assert proc.returncode == 0, f"controller did not stop cleanly: {proc.returncode}"


@pytest.mark.parametrize("topology", ["two-rack", "leaf-spine", "fat-tree"])
def test_all_pairs_ping_without_loss(topology):
    """Pinged as soon as the switches connect, hosts maybe not located yet: proxy ARP
    answers only once the routes are confirmed, so not even a first packet is lost."""
    with controller(topology) as (ofp, client):
        with Fabric(topology, controller=ofp) as fab:
            assert fab.ping_all() == 0.0
            wait_located(client, len(fab.topology.hosts))
            links = client.links()["ports"]
            assert links, "no port statistics were collected"


def iperf_pair(fab, seconds: float) -> dict[str, float]:
    """h1 -> h3:9000 (job-a push) and h2 -> h4:9100 (job-b push) at the same time; both
    cross tor1's uplink. Returns Mbit/s received per job."""
    clients = {
        "job-a": fab.popen("h1", "iperf3", "-c", fab.ip("h3"), "-p", "9000", "-t", str(seconds),
                           "-J", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        "job-b": fab.popen("h2", "iperf3", "-c", fab.ip("h4"), "-p", "9100", "-t", str(seconds),
                           "-J", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
    }
    out = {}
    for job, p in clients.items():
        stdout, stderr = p.communicate(timeout=seconds + 20)
        assert p.returncode == 0, f"iperf3 for {job} failed: {stderr or stdout[-500:]}"
        out[job] = json.loads(stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
    return out


def test_lagging_job_wins_the_bottleneck_and_the_flip_follows():
    jobs = {
        "job-a": {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
                  "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001}]},
        "job-b": {"id": "job-b", "servers": [{"id": "s0", "ip": "10.0.0.4", "port": 9100}],
                  "workers": [{"id": "w0", "ip": "10.0.0.2", "port": 9101}]},
    }
    with controller("two-rack", "--rank", "progress") as (ofp, client):
        with Fabric("two-rack", controller=ofp) as fab:
            wait_located(client, 4)
            tokens, cookies = {}, {}
            for job_id, body in jobs.items():
                answer = client.register_job(body)
                tokens[job_id], cookies[job_id] = answer["token"], int(answer["cookie"], 16)
            fab.popen("h3", "iperf3", "-s", "-p", "9000")
            fab.popen("h4", "iperf3", "-s", "-p", "9100")
            time.sleep(0.5)

            # job-b lags (batch 3 < 10): its push flow is level 1, job-a's level 3
            client.progress("job-a", "w0", 10, tokens["job-a"], wait=True)
            client.progress("job-b", "w0", 3, tokens["job-b"], wait=True)
            marks = dscp_marks(fab, "tor1")
            assert marks[cookies["job-b"]] == {dscp_of_level(1)}
            assert marks[cookies["job-a"]] == {dscp_of_level(3)}
            marks = dscp_marks(fab, "tor2")      # pull flows are marked at the server's ToR
            assert marks[cookies["job-b"]] == {dscp_of_level(0)}
            assert marks[cookies["job-a"]] == {dscp_of_level(2)}
            # each flow's ACKs leave the other end at the flow's level
            acks = dscp_marks(fab, "tor1", acks=True)     # the pulls' ACKs, from the workers
            assert acks[cookies["job-b"]] == {dscp_of_level(0)}
            assert acks[cookies["job-a"]] == {dscp_of_level(2)}
            acks = dscp_marks(fab, "tor2", acks=True)     # the pushes' ACKs, from the servers
            assert acks[cookies["job-b"]] == {dscp_of_level(1)}
            assert acks[cookies["job-a"]] == {dscp_of_level(3)}
            rates = iperf_pair(fab, 5)
            assert rates["job-b"] >= 3 * rates["job-a"], rates

            # job-b overtakes: the ranking flips, and so do marks and throughput
            answer = client.progress("job-b", "w0", 20, tokens["job-b"], wait=True)
            assert answer["applied"] is True and answer["changed_rules"] == 8   # with ACKs
            marks = dscp_marks(fab, "tor1")
            assert marks[cookies["job-a"]] == {dscp_of_level(1)}
            assert marks[cookies["job-b"]] == {dscp_of_level(3)}
            flipped = iperf_pair(fab, 5)
            assert flipped["job-a"] >= 3 * flipped["job-b"], flipped
            print(f"\nlagging job first: {rates}; after the flip: {flipped}", file=sys.stderr)

            # a job that ends takes its rules with it
            client.remove_job("job-a")
            assert cookies["job-a"] not in dscp_marks(fab, "tor1")
            assert cookies["job-b"] in dscp_marks(fab, "tor1")
            assert 'sluice_reaction_latency_seconds_count' in client.metrics()


@pytest.mark.parametrize("topology", ["leaf-spine"])
def test_fabric_check_registers_its_flows_with_the_controller(topology):
    """`sluice fabric check --controller` registers its two iperf3 flows as two jobs
    through the REST API, so the controller classifies and marks them (the senders mark
    nothing): priority ratio >= 5, no loss, and the jobs are gone afterwards."""
    with controller(topology) as (ofp, client):
        env = dict(os.environ, SLUICE_ADMIN_TOKEN=ADMIN)
        proc = subprocess.run([*SLUICE, "fabric", "check", "--topology", topology,
                               "--controller", ofp, "--controller-api", client.url, "--json",
                               "--seconds", "6"], capture_output=True, text=True,
                              timeout=300, env=env, cwd=ROOT)
        assert proc.stdout, proc.stderr[-2000:]
        result = json.loads(proc.stdout)
        print(f"\n{topology} through the controller: {result}", file=sys.stderr)
        assert result["marked_by"] == "controller"
        assert result["bottleneck_mbit"] == pytest.approx(50)   # the default cap, not 100
        assert result["high_level"] < result["low_level"]
        assert result["class_bytes"]["high"] > result["class_bytes"]["low"] > 0, result
        assert result["loss"] == 0 and result["priority_ratio"] >= 5, result
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert not [j for j in client.jobs() if j["id"].startswith("fabric-check")]
