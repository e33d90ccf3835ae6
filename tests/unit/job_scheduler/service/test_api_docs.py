"""Both REST services describe themselves (a valid OpenAPI document), refuse bad bodies
with every problem at once, and export Prometheus series that prometheus_client parses."""

from __future__ import annotations

import http.client
import json

import pytest
from openapi_spec_validator import validate
from prometheus_client.parser import text_string_to_metric_families

from controller.api import ApiServer
from controller.client import ControllerClient
from support.controller_fakes import ADMIN, make_service
from controller.fake_fabric import bring_up
from job_scheduler.service.api import SchedulerHTTPServer
from job_scheduler.service.client import SchedulerClient
from support.scheduler_service import job_file
from support.scheduler_service import make_service as make_scheduler

JOB = {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
       "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001},
                   {"id": "w1", "ip": "10.0.0.2", "port": 9001}]}


@pytest.fixture
def controller():
    svc = bring_up(make_service("two-rack"))
    api = ApiServer(svc, "127.0.0.1", 0).start()
    yield svc, api
    api.stop()


@pytest.fixture
def scheduler(tmp_path):
    svc = make_scheduler(tmp_path, policy="lyapunov")
    server = SchedulerHTTPServer(("127.0.0.1", 0), svc, token="sched-token-123").start()
    yield svc, server
    server.stop()


def get(url_host, port, path, method="GET", body=None, headers=None):
    conn = http.client.HTTPConnection(url_host, port, timeout=10)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, resp.getheader("Content-Type", ""), data


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_controller_openapi_is_valid_and_lists_the_routes(controller):
    _svc, api = controller
    status, _, data = get(api.host, api.port, "/openapi.json")
    doc = json.loads(data)
    assert status == 200
    validate(doc)                                   # raises on an invalid document
    assert {"/jobs", "/jobs/{job_id}", "/jobs/{job_id}/progress", "/flows", "/rules",
            "/links", "/metrics", "/health"} <= set(doc["paths"])
    assert "HTTPBearer" in doc["components"]["securitySchemes"]
    assert "JobRegistration" in doc["components"]["schemas"]


def test_scheduler_openapi_is_valid(scheduler):
    _svc, server = scheduler
    status, _, data = get(server.host, server.port, "/openapi.json")
    doc = json.loads(data)
    assert status == 200
    validate(doc)
    assert {"/submissions", "/jobs", "/jobs/{job_id}", "/jobs/{job_id}/cancel",
            "/metrics", "/health"} <= set(doc["paths"])


def test_controller_bad_body_lists_every_problem(controller):
    svc, api = controller
    bad = {"id": "job a", "servers": [], "workers": [{"ip": "10.0.0.1", "port": 0}],
           "colour": "red"}
    status, _, data = get(api.host, api.port, "/jobs", "POST", json.dumps(bad).encode(),
                          {"Authorization": f"Bearer {ADMIN}",
                           "Content-Type": "application/json"})
    answer = json.loads(data)
    assert status == 400 and len(answer["errors"]) == 4, answer
    for where in ("body.id", "body.servers", "body.workers[0].port", "body.colour"):
        assert any(e.startswith(where) for e in answer["errors"]), answer
    assert svc.registry.jobs == {}


def test_controller_metrics_parse(controller):
    svc, api = controller
    admin = ControllerClient(api.url, ADMIN)
    token = admin.register_job(JOB)["token"]
    admin.progress("job-a", "w0", 5, token, wait=True)
    status, content_type, data = get(api.host, api.port, "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    found = families(data.decode())
    reports = found["sluice_progress_reports"]
    assert reports.type == "counter"
    assert [s.value for s in reports.samples if s.labels == {"result": "accepted"}] == [1.0]
    latency = found["sluice_reaction_latency_seconds"]
    assert latency.type == "histogram"
    assert [s.value for s in latency.samples if s.name.endswith("_count")] == [1.0]
    levels = {s.labels["level"]: s.value for s in found["sluice_rules_by_level"].samples}
    assert sum(levels.values()) == len([r for r in svc.rules() if r["priority"] in (200, 199)])
    assert found["sluice_jobs_active"].samples[0].value == 1.0
    for name in ("sluice_flow_mods", "sluice_rules_installed", "sluice_switches_connected",
                 "sluice_bottleneck_utilisation_ratio"):
        assert name in found, sorted(found)


def test_scheduler_metrics_parse(scheduler):
    svc, server = scheduler
    client = SchedulerClient(server.url, token="sched-token-123")
    client.submit(job_file("a", "b"), "two.yaml")
    found = families(get(server.host, server.port, "/metrics")[2].decode())
    by_state = {s.labels["state"]: s.value for s in found["sluice_scheduler_jobs"].samples}
    assert by_state["queued"] == 2.0 and found["sluice_scheduler_queue_length"].samples[0].value == 2
    svc.tick()
    found = families(get(server.host, server.port, "/metrics")[2].decode())
    by_state = {s.labels["state"]: s.value for s in found["sluice_scheduler_jobs"].samples}
    assert by_state["queued"] + by_state["running"] == 2.0
    # the two arrivals' Cost(1) went into Q (what is left of it after a start, if any)
    assert found["sluice_scheduler_lyapunov_q"].samples[0].value > 0
    assert "sluice_scheduler_lyapunov_z" in found and "sluice_scheduler_free_gpus" in found
    assert found["sluice_scheduler_slots"].samples[0].value == 1.0


def test_scheduler_reports_every_job_file_problem(scheduler):
    _svc, server = scheduler
    text = ("jobs:\n  - {name: a, model: resnet18, dataset_size: 1, epochs: 1, "
            "batch_size: -4, max_gpus: 0, colour: red}\n")
    status, _, data = get(server.host, server.port, "/submissions", "POST", text.encode(),
                          {"Authorization": "Bearer sched-token-123"})
    answer = json.loads(data)
    assert status == 400
    assert sorted(e["field"] for e in answer["errors"]) == ["batch_size", "colour", "max_gpus"]


def test_progress_fast_path_lists_every_problem_and_changes_nothing(controller):
    svc, api = controller
    token = ControllerClient(api.url, ADMIN).register_job(JOB)["token"]
    bad = json.dumps({"worker": 5, "batch": -1, "extra": 1}).encode()
    status, _, data = get(api.host, api.port, "/jobs/job-a/progress", "POST", bad,
                          {"Authorization": f"Bearer {token}"})
    answer = json.loads(data)
    assert status == 400 and len(answer["errors"]) == 3, answer
    assert {e.split(":")[0] for e in answer["errors"]} == {"body.worker", "body.batch",
                                                           "body.extra"}
    status, _, data = get(api.host, api.port, "/jobs/job-a/progress", "POST", b"{not json",
                          {"Authorization": f"Bearer {token}"})
    assert status == 400 and b"not valid JSON" in data
    assert svc.registry.jobs["job-a"].batches == {}
