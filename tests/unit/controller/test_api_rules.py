"""One status for a body that fits its schema but breaks a rule: 422 naming the field
(400 stays for a body that does not parse or does not fit the schema), over HTTP, and
the OpenAPI document naming the rules a schema cannot express."""

import copy
import json

import pytest

from controller.api import ApiServer
from support.controller_api import JOB, raw
from support.controller_fakes import ADMIN, make_service
from controller.fake_fabric import bring_up

HEADERS = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}


@pytest.fixture
def server():
    svc = bring_up(make_service("two-rack"))
    api = ApiServer(svc, "127.0.0.1", 0).start()
    yield svc, api
    api.stop()


def post(api, path, body, headers=HEADERS):
    status, data = raw(api, "POST", path, json.dumps(body).encode(), headers)
    return status, json.loads(data)


def _job(change):
    job = copy.deepcopy(JOB)
    change(job)
    return job


@pytest.mark.parametrize("change,field,words", [
    # a duplicate server id (400 before: the same kind of rule as the endpoint clash)
    (lambda j: j["servers"].append({"id": "s0", "ip": "10.0.0.4", "port": 9000}),
     "servers[1].id", "duplicate id"),
    (lambda j: j["workers"].append({"id": "w1", "ip": "10.0.0.4", "port": 9001}),
     "workers[2].id", "duplicate id"),
    # an endpoint shared by a server and a worker
    (lambda j: j["servers"].__setitem__(0, {"id": "s0", "ip": "10.0.0.1", "port": 9001}),
     "workers[0]", "own address"),
    # an IP of the right form that is not a host of the topology
    (lambda j: j["workers"][0].__setitem__("ip", "10.9.9.9"), "workers[0].ip",
     "not a host"),
])
def test_a_registration_breaking_a_rule_is_422_naming_the_field(server, change, field, words):
    svc, api = server
    status, answer = post(api, "/jobs", _job(change))
    assert status == 422 and answer["status"] == 422, answer
    assert answer["field"] == field and words in answer["error"], answer
    assert svc.jobs() == []


@pytest.mark.parametrize("body", [
    {**JOB, "servers": "x"},                              # a wrong type
    {**JOB, "extra": 1},                                  # an unknown field
    _job(lambda j: j["workers"][0].__setitem__("port", 0)),   # out of its bounds
])
def test_a_body_that_does_not_fit_the_schema_stays_400(server, body):
    svc, api = server
    status, answer = post(api, "/jobs", body)
    assert status == 400 and answer["errors"], answer
    assert svc.jobs() == []


def test_a_report_from_a_worker_the_job_lacks_is_422_naming_worker(server):
    svc, api = server
    status, job = post(api, "/jobs", JOB)
    assert status == 201
    auth = {**HEADERS, "Authorization": f"Bearer {job['token']}"}
    status, answer = post(api, "/jobs/job-a/progress", {"worker": "w7", "batch": 1}, auth)
    assert status == 422 and answer["field"] == "worker" and "w7" in answer["error"]
    status, answer = post(api, "/jobs/job-a/progress", {"worker": "w0", "batch": -1}, auth)
    assert status == 400                                  # out of the schema's bounds
    assert svc.registry.jobs["job-a"].batches == {}


def test_the_document_names_the_rules_no_schema_expresses(server):
    _svc, api = server
    status, data = raw(api, "GET", "/openapi.json")
    doc = json.loads(data)
    register = doc["paths"]["/jobs"]["post"]
    for rule in ("ids of `servers` are unique", "no endpoint is shared by a server and a "
                 "worker", "host of the controller's topology", "not registered yet"):
        assert rule in register["description"], rule
    assert "duplicate server or worker id" in register["responses"]["422"]["description"]
    progress = doc["paths"]["/jobs/{job_id}/progress"]["post"]
    assert "422" in progress["responses"] and "registered workers" in progress["description"]
