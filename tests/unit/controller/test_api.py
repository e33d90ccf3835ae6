"""The northbound HTTP API, in process: real ThreadingHTTPServer + ControllerClient,
the service on a fake flow table."""

import http.client
import json
import logging

import pytest

from controller.api import MAX_BODY, ApiServer
from controller.client import ControllerClient, ControllerError
from support.controller_fakes import ADMIN, make_service
from controller.fake_fabric import bring_up
from support.controller_api import JOB, raw

@pytest.fixture
def server():
    svc = bring_up(make_service("two-rack", rate_per_s=50))
    api = ApiServer(svc, "127.0.0.1", 0).start()
    yield svc, api
    api.stop()


def test_register_report_list_remove(server, caplog):
    svc, api = server
    caplog.set_level(logging.DEBUG)
    admin = ControllerClient(api.url, ADMIN)
    job = admin.register_job(JOB)
    token = job["token"]
    assert job["id"] == "job-a" and len(token) > 20
    ans = admin.progress("job-a", "w0", 5, token, wait=True)
    assert ans["result"] == "accepted"
    # w0 is now behind w1 (batch 0 -> more urgent): its flows got new levels
    assert ans["changed_rules"] > 0 and ans["applied"] is True
    flows = admin.flows("job-a")["flows"]
    assert len(flows) == 4 and flows[0]["worker"] == "w1" and flows[0]["kind"] == "pull"
    assert all(f["rules"] for f in flows)
    assert [j["batches"] for j in admin.jobs()] == [{"w0": 5}]
    metrics = admin.metrics()
    assert 'sluice_progress_reports_total{result="accepted"} 1' in metrics
    assert "sluice_reaction_latency_seconds_count 1" in metrics
    assert admin.remove_job("job-a")["removed_rules"] == 8   # 4 flows + their ACKs
    assert admin.jobs() == [] and admin.flows()["flows"] == []
    assert token not in caplog.text and ADMIN not in caplog.text


def test_refusals_change_nothing(server):
    svc, api = server
    admin = ControllerClient(api.url, ADMIN)
    token = admin.register_job(JOB)["token"]
    state = json.dumps(admin.jobs()), len(svc.sink.sent)
    cases = [
        (lambda: ControllerClient(api.url, "wrong-token").register_job({**JOB, "id": "b"}), 401),
        (lambda: ControllerClient(api.url, None).remove_job("job-a"), 401),
        (lambda: admin.remove_job("nope"), 404),
        (lambda: admin.progress("job-a", "w0", 3, "bad-token"), 401),
        (lambda: admin.progress("job-a", "w0", 3, None), 401),
        (lambda: admin.progress("job-a", "w7", 3, token), 422),    # not a worker of it
        (lambda: admin.progress("job-a", "w0", -1, token), 400),
        (lambda: admin.register_job({**JOB, "workers": "x"}), 400),
        (lambda: admin.register_job(JOB), 409),
        (lambda: admin.request("GET", "/nope"), 404),
    ]
    for call, status in cases:
        with pytest.raises(ControllerError) as err:
            call()
        assert err.value.status == status, err.value
    assert (json.dumps(admin.jobs()), len(svc.sink.sent)) == state


def test_bad_json_oversize_and_missing_length(server):
    _svc, api = server
    auth = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}
    status, body = raw(api, "POST", "/jobs", b"{not json", auth)
    assert status == 400 and b"not valid JSON" in body
    status, _ = raw(api, "POST", "/jobs", b"x" * (MAX_BODY + 1), auth)
    assert status == 413
    conn = http.client.HTTPConnection(api.host, api.port, timeout=5)
    conn.putrequest("POST", "/jobs")
    conn.putheader("Authorization", f"Bearer {ADMIN}")
    conn.endheaders()                 # no body at all: one is required here
    resp = conn.getresponse()
    assert resp.status == 400 and b"body" in resp.read()
    conn.close()
    conn = http.client.HTTPConnection(api.host, api.port, timeout=5)
    conn.putrequest("POST", "/jobs")
    conn.putheader("Authorization", f"Bearer {ADMIN}")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()                 # a streamed body: its size unknown, refused
    assert conn.getresponse().status == 411
    conn.close()


def test_rate_limit_429():
    # 1 report/s per job: robust even when a loaded machine makes each request slow
    svc = bring_up(make_service("two-rack", rate_per_s=1))
    api = ApiServer(svc, "127.0.0.1", 0).start()
    try:
        admin = ControllerClient(api.url, ADMIN)
        token = admin.register_job(JOB)["token"]
        statuses = []
        for b in range(1, 11):
            try:
                admin.progress("job-a", "w0", b, token)
                statuses.append(200)
            except ControllerError as err:
                statuses.append(err.status)
        assert statuses[0] == 200 and 429 in statuses, statuses
        last_ok = max(b for b, st in zip(range(1, 11), statuses) if st == 200)
        assert svc.registry.jobs["job-a"].batches["w0"] == last_ok   # 429s recorded nothing
    finally:
        api.stop()
