"""A controller per pod for real (docs/deploy.md, "A controller per pod"): three
`sluice controller` processes over TCP (``--pod pod1``, ``--pod pod2``, ``--pod core``)
drive the Open vSwitch switches of the two-pod fabric, each switch connected to its own
scope's controller only; a real `sluice scheduler --controllers FILE` registers each job
with its pod's controller. Needs root and OVS; fails loudly otherwise (never skipped)."""

from __future__ import annotations

import re
from contextlib import ExitStack, contextmanager

import pytest

from controller.pods import pod_scope
from job_scheduler.service.client import SchedulerClient
from mininet_fabric.fabric import Fabric
from ps_runtime.ports import free_port
from support.controller_process import ADMIN, start_controller, stop, wait_located
from support.scheduler_process import ServiceProcess, wait_for
from support.scheduler_service import job_file
from topologies import load_topology

pytestmark = pytest.mark.fabric

TOPO = load_topology("two-pod")
SCOPES = ("pod1", "pod2", "core")


@contextmanager
def scope_controller(scope: str, tmp_path):
    ofp, api = free_port(), free_port()
    log = open(tmp_path / f"controller-{scope}.log", "w+")
    proc, client = start_controller("two-pod", ofp, api, log, "--pod", scope,
                                    "--rank", "progress")
    try:
        yield ofp, client
    finally:
        stop(proc)
        log.close()
    assert proc.returncode == 0, f"controller {scope} did not stop cleanly"


def job_ips(dump: str) -> set[str]:
    """The IPs named by the PS-flow rules (priority 200/199) of one switch's dump."""
    out = set()
    for line in dump.splitlines():
        if re.search(r"priority=(200|199)\b", line):
            out |= set(re.findall(r"nw_(?:src|dst)=([0-9.]+)", line))
    return out


def test_pods_route_to_each_other_and_a_job_stays_in_its_pod(tmp_path):
    with ExitStack() as stack:
        ctl = {s: stack.enter_context(scope_controller(s, tmp_path)) for s in SCOPES}
        switch_of = {name: f"127.0.0.1:{ctl[s][0]}" for s in SCOPES
                     for name in pod_scope(TOPO, s).owned}
        fab = stack.enter_context(Fabric(TOPO, controller=switch_of))
        # every pair, across pods too: proxy ARP in the pod, the gateway MAC for the
        # other pod's hosts, prefix routes up to the core and across it
        assert fab.ping_all() == 0.0, fab.lost_pairs
        for pod in ("pod1", "pod2"):
            wait_located(ctl[pod][1], 4)
        assert ctl["core"][1].jobs() == []

        (tmp_path / "controllers.yaml").write_text(
            "controllers:\n" + "".join(f"  {pod}: {ctl[pod][1].url}\n"
                                       for pod in ("pod1", "pod2")))
        sched = ServiceProcess(tmp_path, "--topology", "two-pod", "--policy", "fifo",
                               "--time-factor", "1000",
                               "--controllers", str(tmp_path / "controllers.yaml"))
        sched.env["SLUICE_CONTROLLER_TOKEN"] = ADMIN
        stack.callback(sched.stop)
        sched.start()
        client = SchedulerClient(sched.url, timeout=5)
        client.submit(job_file("fills-pod1", max_gpus=8), source="a.yaml")
        wait_for(lambda: [j for j in client.jobs("running") if j["name"] == "fills-pod1"],
                 timeout=20)
        client.submit(job_file("in-pod2", max_gpus=4), source="b.yaml")
        running = wait_for(lambda: len(client.jobs("running")) == 2 and client.jobs("running"),
                           timeout=20)
        hosts = {j["name"]: j["placement"]["worker_hosts"] + j["placement"]["ps_hosts"]
                 for j in running}
        assert {TOPO.domain_of(h) for h in hosts["in-pod2"]} == {"pod2"}
        ids = {j["name"]: f"{j['name']}.{j['id']}" for j in running}   # NAME.ID there
        assert [j["id"] for j in ctl["pod1"][1].jobs()] == [ids["fills-pod1"]]
        assert [j["id"] for j in ctl["pod2"][1].jobs()] == [ids["in-pod2"]]

        pod_ips = {pod: {h.ip for h in TOPO.hosts if TOPO.domain_of(h.name) == pod}
                   for pod in ("pod1", "pod2")}
        seen = {}
        for s in TOPO.switches:
            ips = job_ips(fab.dump_flows(s.name))
            seen[s.name] = ips
            owner = next(p for p in SCOPES if s.name in pod_scope(TOPO, p).owned)
            if owner == "core":
                assert ips == set(), f"job rules on the core switch: {ips}"
            else:
                assert ips <= pod_ips[owner], f"{s.name} ({owner}) holds {ips}"
        in_pod2 = {TOPO.host_by_name[h].ip for h in hosts["in-pod2"]}
        assert in_pod2 & set().union(*(seen[n] for n in ("tor3", "tor4"))), seen

        client.cancel(next(j["id"] for j in running if j["name"] == "in-pod2"))
        wait_for(lambda: ctl["pod2"][1].jobs() == [], timeout=10)
        assert not any(job_ips(fab.dump_flows(n)) for n in ("tor3", "tor4", "agg2"))
        assert [j["id"] for j in ctl["pod1"][1].jobs()] == [ids["fills-pod1"]]
