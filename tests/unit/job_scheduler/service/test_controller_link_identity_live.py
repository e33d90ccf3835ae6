"""The same job file submitted twice to a scheduler started with ``--controller``: both
jobs are registered at the real controller, each under its own identity, and both
jobs' flows are classified. Real processes (`sluice controller` with no switch
connected, `sluice scheduler --executor simulated`) on free loopback ports."""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from ps_runtime.ports import free_port
from support.live_services import start

SCHEDULER_TOKEN = "identity-scheduler-admin-token"
CONTROLLER_TOKEN = "identity-controller-admin-token"
JOB_FILE = ("jobs:\n  - {name: resnet-a, model: resnet18, dataset_size: 100000, epochs: 50, "
            "batch_size: 32, max_gpus: 6}\n")


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def submit(url: str, text: str) -> dict:
    req = urllib.request.Request(url + "/submissions", data=text.encode(), method="POST",
                                 headers={"Authorization": f"Bearer {SCHEDULER_TOKEN}",
                                          "Content-Type": "application/yaml"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 201
        return json.load(resp)


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


@pytest.fixture
def services(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLUICE_SCHEDULER_TOKEN", "SLUICE_ADMIN_TOKEN",
                        "SLUICE_CONTROLLER_TOKEN")}
    ctl, sched = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    procs = []
    try:
        procs.append(start(["controller", "--api", ctl.removeprefix("http://"), "--ofp-port",
                            str(free_port()), "--state-file", str(tmp_path / "ctl.json")],
                           {**env, "SLUICE_ADMIN_TOKEN": CONTROLLER_TOKEN},
                           tmp_path / "controller.log", ctl))
        procs.append(start(["scheduler", "--listen", sched.removeprefix("http://"), "--db",
                            str(tmp_path / "jobs.db"), "--slot", "0.2", "--policy", "fifo",
                            "--executor", "simulated", "--controller", ctl],
                           {**env, "SLUICE_SCHEDULER_TOKEN": SCHEDULER_TOKEN,
                            "SLUICE_CONTROLLER_TOKEN": CONTROLLER_TOKEN},
                           tmp_path / "scheduler.log", sched))
        yield {"controller": ctl, "scheduler": sched, "logs": tmp_path}
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def test_one_job_file_twice_two_identities_both_classified(services):
    ctl, sched = services["controller"], services["scheduler"]
    first, second = submit(sched, JOB_FILE), submit(sched, JOB_FILE)
    ids = first["jobs"] + second["jobs"]
    assert len(set(ids)) == 2
    jobs = wait_for(lambda: (lambda js: js if all(j["state"] == "running" for j in js)
                             and all((j.get("controller") or {}).get("state") == "registered"
                                     for j in js) else None)(
        [get(f"{sched}/jobs/{i}") for i in ids]))
    # the name is a label; each submission has its own identity at the controller
    assert {j["name"] for j in jobs} == {"resnet-a"}
    identities = [j["controller"]["id"] for j in jobs]
    assert identities == [f"resnet-a.{i}" for i in ids]
    registered = {j["id"]: j for j in get(f"{ctl}/jobs")["jobs"]}
    assert sorted(registered) == sorted(identities)
    # each job has its own port block: on shared hosts their flows stay apart
    endpoints = [{(e["ip"], e["port"]) for e in registered[i]["servers"]} for i in identities]
    assert not endpoints[0] & endpoints[1]
    # every flow of each job is classified: a priority level and its DSCP (no switch is
    # connected, so no rule is installed: tests/fabric checks the switches' rules)
    keys = []
    for ident in identities:
        flows = get(f"{ctl}/flows?job={ident}")["flows"]
        assert flows and all(f["job"] == ident for f in flows)
        assert all(f["level"] is not None and f["dscp"] is not None for f in flows), flows
        keys.append({(f["src"], f["dst"], f["dst_port"]) for f in flows})
    assert not keys[0] & keys[1]
    for job in jobs:
        assert not [e for e in job["events"] if e["kind"] == "controller-error"], job["events"]
    log = (services["logs"] / "scheduler.log").read_text()
    assert "already registered" not in log and "could not register" not in log
