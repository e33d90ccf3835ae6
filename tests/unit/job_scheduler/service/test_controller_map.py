"""``sluice scheduler --controllers FILE``: a controller per pod. The file is checked
against the topology (exit 2 naming the file and field), and each job is registered
with, and removed from, the controller of its pod: against two real northbound APIs of
pod-scoped controllers (controller logic on fake flow tables)."""

from __future__ import annotations

import socket

import pytest

from job_scheduler.core.estimator import Estimator
from job_scheduler.service.controller_map import (PodControllers, load_controller_map,
                                                  parse_controller_map)
from job_scheduler.service.executors import SimulatedExecutor
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.store import JobStore
from ps_runtime.ports import free_port
from sluice_common.errors import InputError
from support.scheduler_service import job_file
from topologies import load_topology

PODS = load_topology("two-pod")
GOOD = {"controllers": {"pod1": "http://127.0.0.1:8081", "pod2": "http://10.0.0.9:8082/"}}


def test_a_good_map_names_every_pod():
    assert parse_controller_map(GOOD, "c.yaml", PODS) == {
        "pod1": "http://127.0.0.1:8081", "pod2": "http://10.0.0.9:8082"}
    tls = {"controllers": {**GOOD["controllers"], "pod2": "https://ctl2.example:8443/"}}
    assert parse_controller_map(tls, "c.yaml", PODS)["pod2"] == "https://ctl2.example:8443"


@pytest.mark.parametrize("data, field, words", [
    ({"controllers": {**GOOD["controllers"], "pod3": "http://h:1"}}, "controllers.pod3",
     ["no pod 'pod3'", "pod1, pod2"]),
    ({"controllers": {"pod1": "http://h:1"}}, "controllers", ["pod2", "every pod"]),
    ({"controllers": {**GOOD["controllers"], "pod2": "ftp://h:1"}}, "controllers.pod2",
     ["http(s)://HOST:PORT"]),
    ({"controllers": {**GOOD["controllers"], "pod2": "http://h"}}, "controllers.pod2",
     ["http(s)://HOST:PORT"]),
    ({"controllers": {**GOOD["controllers"], "pod2": "http://h:99999"}}, "controllers.pod2",
     ["http(s)://HOST:PORT"]),
    ({"controllers": {**GOOD["controllers"], "pod2": 8080}}, "controllers.pod2", ["8080"]),
    ({"pods": GOOD["controllers"]}, "controllers", ["{controllers: {POD: URL}}"]),
    (["http://h:1"], "controllers", ["mapping"]),
])
def test_bad_maps_name_the_file_and_the_field(data, field, words):
    with pytest.raises(InputError) as err:
        parse_controller_map(data, "c.yaml", PODS)
    assert err.value.source == "c.yaml" and err.value.field == field
    for w in words:
        assert w in err.value.reason


def test_an_unreadable_or_broken_file_is_named(tmp_path):
    with pytest.raises(InputError, match="missing.yaml: cannot read"):
        load_controller_map(tmp_path / "missing.yaml", PODS)
    (tmp_path / "bad.yaml").write_text("controllers: {pod1: [")
    with pytest.raises(InputError, match="bad.yaml: not YAML"):
        load_controller_map(tmp_path / "bad.yaml", PODS)


def test_the_cli_exits_2_on_a_bad_map_and_on_both_flags(tmp_path, monkeypatch, capsys):
    from sluice.cli import main

    monkeypatch.setenv("SLUICE_CONTROLLER_TOKEN", "a-controller-admin-token-123")
    bad = tmp_path / "controllers.yaml"
    bad.write_text("controllers: {pod1: 'http://127.0.0.1:1', pod9: 'http://127.0.0.1:2'}\n")
    port = free_port()
    common = ["scheduler", "--topology", "two-pod", "--listen", f"127.0.0.1:{port}",
              "--db", str(tmp_path / "x.db")]
    assert main([*common, "--controllers", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "controllers.pod9" in err
    assert main([*common, "--controllers", str(bad), "--controller", "http://h:1"]) == 2
    assert "not both" in capsys.readouterr().err
    with socket.socket() as s:            # nothing was started
        assert s.connect_ex(("127.0.0.1", port)) != 0
    assert not (tmp_path / "x.db").exists()


class Clock:
    def __init__(self):
        self.t = 1_000_000.0

    def __call__(self):
        return self.t


@pytest.fixture
def pod_apis(monkeypatch):
    """pod -> (its controller service, its running northbound API)."""
    from controller.api import ApiServer
    from support.controller_fakes import ADMIN
    from support.pod_fakes import make_pod_services

    _full, services = make_pod_services(scopes=("pod1", "pod2"))
    apis = {pod: ApiServer(svc, "127.0.0.1", 0).start() for pod, svc in services.items()}
    monkeypatch.setenv("SLUICE_CONTROLLER_TOKEN", ADMIN)
    try:
        yield {pod: (services[pod], apis[pod]) for pod in apis}
    finally:
        for api in apis.values():
            api.stop()


def _service(tmp_path, controller, clock):
    executors = {"simulated": SimulatedExecutor(lambda spec, d: 100.0, 1.0)}
    return SchedulerService(JobStore(tmp_path / "jobs.db"), PODS,
                            make_policy_step("fifo", PODS, Estimator()), executors,
                            "simulated", controller=controller, clock=clock)


def _registered(pod_apis, pod):
    """The jobs registered at the pod's controller, by name (each under NAME.ID)."""
    return sorted(j["id"].rsplit(".", 1)[0] for j in pod_apis[pod][0].jobs())


def test_each_job_goes_to_its_pods_controller_and_leaves_it(tmp_path, pod_apis):
    links = PodControllers({pod: api.url for pod, (_svc, api) in pod_apis.items()}, PODS)
    clock = Clock()
    svc = _service(tmp_path, links, clock)
    svc.submit(job_file("whole1", max_gpus=8), "a.yaml")      # fills pod1 (first fit)
    svc.tick()
    svc.submit(job_file("small2", max_gpus=4), "b.yaml")     # two hosts of pod2
    svc.tick()
    by_name = {j.name: j for j in svc.store.jobs(["running"])}
    assert {PODS.domain_of(h) for h in by_name["small2"].placement["worker_hosts"]} == {"pod2"}
    assert _registered(pod_apis, "pod1") == ["whole1"]
    assert _registered(pod_apis, "pod2") == ["small2"]
    pod2_ctl = pod_apis["pod2"][0]
    cookie = pod2_ctl.registry.jobs[f"small2.{by_name['small2'].id}"].cookie
    assert pod2_ctl.sink.table.with_cookie(cookie)
    # (each controller numbers its own cookies: pod1's rules name no host of small2's)
    small2_ips = {PODS.host_by_name[h].ip for h in by_name["small2"].placement["worker_hosts"]}
    assert not [r for r in pod_apis["pod1"][0].sink.table.rules.values()
                if small2_ips & {str(v) for _f, v in r.match}]
    svc.cancel(by_name["small2"].id)                      # removed where it was registered
    assert _registered(pod_apis, "pod2") == [] and not pod2_ctl.sink.table.with_cookie(cookie)
    # what the job's processes (which report its progress) are given: its pod's controller
    env = links.job_started(by_name["small2"])
    assert env["SLUICE_CONTROLLER_URL"] == pod_apis["pod2"][1].url
    assert env["SLUICE_CONTROLLER_JOB_TOKEN"]
    links.job_ended(by_name["small2"])
    assert _registered(pod_apis, "pod2") == []
    clock.t += 1000                                        # whole1 ends
    svc.tick()
    assert _registered(pod_apis, "pod1") == []


def test_a_job_spanning_pods_is_registered_nowhere_and_says_so(tmp_path, pod_apis):
    links = PodControllers({pod: api.url for pod, (_svc, api) in pod_apis.items()}, PODS)
    clock = Clock()
    svc = _service(tmp_path, links, clock)
    svc.submit(job_file("wide", max_gpus=12), "w.yaml")      # more than a pod's 8 GPUs
    svc.tick()
    (job,) = svc.store.jobs(["running"])
    assert {PODS.domain_of(h) for h in job.placement["worker_hosts"]} == {"pod1", "pod2"}
    assert _registered(pod_apis, "pod1") == _registered(pod_apis, "pod2") == []
    events = [(kind, detail) for _at, kind, detail in svc.store.events(job.id)]
    assert any(kind == "controller-error" and "spans pods pod1, pod2" in detail
               for kind, detail in events), events
    clock.t += 1000
    svc.tick()                                             # it ends: nothing to remove
    assert svc.store.get(job.id).state == "finished"
    assert [k for k, _d in [(kind, d) for _a, kind, d in svc.store.events(job.id)]
            ].count("controller-error") == 1


def test_one_controller_is_unchanged(tmp_path, pod_apis):
    """``--controller URL`` still registers every job with that one controller."""
    from job_scheduler.service.controller_link import ControllerNotifier
    from job_scheduler.service.controller_map import controller_link

    url = pod_apis["pod1"][1].url
    link = controller_link(url, None, PODS)
    assert isinstance(link, ControllerNotifier) and link.where == url
    assert controller_link(None, None, PODS) is None


def test_one_controller_over_https_is_accepted_and_a_non_http_url_is_not(monkeypatch):
    """docs/deploy.md gives the controller's API HTTPS off loopback: the scheduler takes
    ``--controller https://...`` (the client checks the certificate when it connects);
    any other scheme is the flag's error."""
    from job_scheduler.service.controller_map import controller_link
    from sluice_common.errors import InputError

    monkeypatch.setenv("SLUICE_CONTROLLER_TOKEN", "a-controller-admin-token-123")
    link = controller_link("https://controller.example:8443", None, PODS)
    assert link.where == "https://controller.example:8443" and link.client.https
    with pytest.raises(InputError) as err:
        controller_link("ftp://controller.example:21", None, PODS)
    assert "http:// or https://" in str(err.value) and "controller" in str(err.value)
