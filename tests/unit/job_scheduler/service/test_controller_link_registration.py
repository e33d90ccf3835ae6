"""A job's registration at the controller: its own identity per submission, a failure
shown on the job (``controller`` of ``GET /jobs/{id}``) and retried with backoff until
it succeeds or the job ends."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from controller.client import ControllerError
from job_scheduler.service import controller_link as ctl
from job_scheduler.service.api import SchedulerHTTPServer
from job_scheduler.service.controller_link import (ControllerNotifier, Registrations,
                                                   controller_job_id, registration_view,
                                                   retry_delay)
from job_scheduler.service.store import JobRecord
from sluice_common.jobspec import parse_jobs_text
from support.scheduler_api import TOKEN, call
from support.scheduler_service import TOPO, job_file, make_service


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _record(job_id: int, name: str) -> JobRecord:
    (spec,) = parse_jobs_text(job_file(name), "t.yaml")
    return JobRecord(id=job_id, submission_id=1, name=name, spec=spec, state="running",
                     submitted_at=0.0)


# ---- pure ---------------------------------------------------------------------------------

def test_the_identity_is_the_submissions_own_with_the_name_as_a_label():
    a, b = _record(1, "resnet-a"), _record(2, "resnet-a")
    assert controller_job_id(a) == "resnet-a.1" and controller_job_id(b) == "resnet-a.2"
    long = controller_job_id(_record(123456789, "x" * 64))
    assert len(long) == 64 and long.endswith(".123456789")     # the id is never cut


def test_the_delay_grows_then_stays_at_a_minute():
    assert [retry_delay(n) for n in range(1, 10)] == [1, 2, 4, 8, 16, 30, 60, 60, 60]


def test_the_view_follows_the_events_of_the_last_start():
    err = (1.0, "controller-error", "register: controller answered 500: down")
    ok = (2.0, "controller-registered", "a.1")
    assert registration_view([], True) is None
    assert registration_view([(0.0, "started", "")], True) is None
    assert registration_view([(0.0, "started", ""), err], True, attempts=3) == {
        "state": "pending", "error": "controller answered 500: down", "attempts": 3}
    assert registration_view([(0.0, "started", ""), err, ok], True) == {
        "state": "registered", "id": "a.1", "error": None, "attempts": 2}
    # ended before the controller took it: failed, not pending
    assert registration_view([(0.0, "started", ""), err], False)["state"] == "failed"
    # a new start begins again
    assert registration_view([(0.0, "started", ""), ok, (3.0, "resumed", ""), err],
                             True)["attempts"] == 1
    spans = (1.0, "controller-error", "register, not retried: placement spans pods")
    assert registration_view([(0.0, "started", ""), spans], True)["state"] == "failed"


def test_registrations_count_attempts_and_schedule_the_next():
    book = Registrations()
    assert book.failed(7, 100.0, "down") == (1, True)
    assert book.due(100.5) == [] and book.due(101.0) == [7]
    assert book.failed(7, 101.0, "down") == (2, False)         # the same error: no event
    assert book.due(102.9) == [] and book.due(103.0) == [7]
    assert book.failed(7, 103.0, "refused") == (3, True)
    book.drop(7)
    assert book.due(1e9) == [] and 7 not in book


# ---- the service, with a controller that fails then answers ----------------------------------

class FlakyController:
    """``job_started`` raises for the first ``failures`` calls, then registers."""

    def __init__(self, failures: int, error: Exception | None = None):
        self.failures, self.error = failures, error
        self.calls: list[tuple[str, int | None]] = []
        self.ended: list[str] = []

    def job_started(self, job, base_port=None):
        self.calls.append((controller_job_id(job), base_port))
        if len(self.calls) <= self.failures:
            raise self.error or ControllerError(500, "internal error (see controller log)")
        return {"SLUICE_CONTROLLER_JOB_TOKEN": "tok", ctl.CONTROLLER_JOB_ENV:
                controller_job_id(job)}

    def job_ended(self, job):
        self.ended.append(controller_job_id(job))


def test_a_failed_registration_is_on_the_job_and_retried_until_it_succeeds(tmp_path):
    clock = Clock()
    flaky = FlakyController(failures=3)
    svc = make_service(tmp_path, clock=clock, controller=flaky)
    svc.submit(job_file("a"), "a.yaml")
    svc.tick()
    (job,) = svc.store.jobs(["running"])
    view = svc.controller_view(job)
    assert view["state"] == "pending" and view["attempts"] == 1 and "500" in view["error"]
    clock.t += 0.5
    svc.tick()                                       # not yet: the first delay is 1 s
    assert len(flaky.calls) == 1
    clock.t += 0.5
    svc.tick()
    assert len(flaky.calls) == 2 and svc.controller_view(job)["attempts"] == 2
    clock.t += 2.0
    svc.tick()
    assert len(flaky.calls) == 3 and svc.controller_view(job)["state"] == "pending"
    clock.t += 3.9
    svc.tick()                                       # the third delay is 4 s
    assert len(flaky.calls) == 3
    clock.t += 0.1
    svc.tick()
    assert svc.controller_view(job) == {"state": "registered", "id": f"a.{job.id}",
                                        "error": None, "attempts": 4}
    # the same error three times is one event; the success another
    kinds = [k for _at, k, _d in svc.store.events(job.id)]
    assert kinds.count("controller-error") == 1 and kinds.count("controller-registered") == 1
    # each attempt with the block the job holds (the simulated executor's)
    assert len({base for _id, base in flaky.calls}) == 1 and flaky.calls[0][1] is not None
    clock.t += 1000.0
    svc.tick()                                       # it ends: removed from the controller
    assert flaky.ended == [f"a.{job.id}"] and len(flaky.calls) == 4


def test_a_job_that_ends_unregistered_is_failed_there_and_no_longer_retried(tmp_path):
    clock = Clock()
    flaky = FlakyController(failures=10**6)
    svc = make_service(tmp_path, clock=clock, controller=flaky)
    svc.submit(job_file("a"), "a.yaml")
    svc.tick()
    (job,) = svc.store.jobs(["running"])
    svc.cancel(job.id)
    calls = len(flaky.calls)
    clock.t += 3600.0
    svc.tick()
    assert len(flaky.calls) == calls and flaky.ended == []    # nothing to remove there
    view = svc.controller_view(svc.store.get(job.id))
    assert view["state"] == "failed" and "500" in view["error"]


def test_a_refusal_that_would_repeat_is_failed_at_once_not_retried(tmp_path):
    from job_scheduler.service.controller_map import SpansPods

    clock = Clock()
    flaky = FlakyController(failures=10**6, error=SpansPods("placement spans pods p1, p2"))
    svc = make_service(tmp_path, clock=clock, controller=flaky)
    svc.submit(job_file("a"), "a.yaml")
    svc.tick()
    for _ in range(5):                  # past any retry delay, the job still running
        clock.t += 10.0
        svc.tick()
    (job,) = svc.store.jobs(["running"])
    assert len(flaky.calls) == 1
    assert svc.controller_view(job) == {"state": "failed", "attempts": 1,
                                        "error": "placement spans pods p1, p2"}


def test_a_restarted_service_retries_what_the_previous_left_unregistered(tmp_path):
    clock = Clock()
    svc = make_service(tmp_path, clock=clock, controller=FlakyController(failures=1))
    svc.submit(job_file("a"), "a.yaml")
    svc.tick()
    svc.store.close()
    again_ctl = FlakyController(failures=0)
    again = make_service(tmp_path, clock=clock, controller=again_ctl)
    again.recover()
    again.tick()
    (job,) = again.store.jobs(["running"])
    assert [i for i, _ in again_ctl.calls] == [f"a.{job.id}"]
    assert again.controller_view(job)["state"] == "registered"


# ---- over HTTP: a controller answering 500, then 201 --------------------------------------

class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        if len(self.server.bodies) <= self.server.failures:
            self._answer(500, {"error": "internal error (see controller log)", "status": 500})
        else:
            self._answer(201, {**body, "token": "job-token"})

    def do_DELETE(self):
        self._answer(200, {"id": self.path.rsplit("/", 1)[1], "removed_rules": 0})


@pytest.fixture
def flaky_http():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.bodies, server.failures = [], 1
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_get_job_shows_the_registration_failing_then_registered(tmp_path, flaky_http,
                                                                 monkeypatch):
    monkeypatch.setenv("SLUICE_CONTROLLER_TOKEN", "admin")
    notifier = ControllerNotifier(f"http://127.0.0.1:{flaky_http.server_address[1]}", TOPO)
    clock = Clock()
    svc = make_service(tmp_path, clock=clock, controller=notifier)
    api = SchedulerHTTPServer(("127.0.0.1", 0), svc, token=TOKEN).start()
    try:
        svc.submit(job_file("a"), "a.yaml")
        svc.tick()
        (job,) = svc.store.jobs(["running"])
        status, data = call(api, "GET", f"/jobs/{job.id}")[:2]
        answer = json.loads(data)
        assert status == 200 and answer["controller"]["state"] == "pending", answer
        assert "500" in answer["controller"]["error"] and answer["controller"]["attempts"] == 1
        assert any(e["kind"] == "controller-error" for e in answer["events"])
        clock.t += 1.0
        svc.tick()
        answer = json.loads(call(api, "GET", f"/jobs/{job.id}")[1])
        assert answer["controller"] == {"state": "registered", "id": f"a.{job.id}",
                                        "error": None, "attempts": 2}
        assert [b["id"] for b in flaky_http.bodies] == [f"a.{job.id}"] * 2
    finally:
        api.stop()


def test_without_a_controller_the_job_has_no_controller_state(tmp_path):
    svc = make_service(tmp_path)
    api = SchedulerHTTPServer(("127.0.0.1", 0), svc, token=TOKEN).start()
    try:
        svc.submit(job_file("a"), "a.yaml")
        svc.tick()
        answer = json.loads(call(api, "GET", "/jobs/1")[1])
        assert answer["state"] == "running" and answer["controller"] is None
    finally:
        api.stop()


def test_a_registration_whose_answer_was_lost_is_replaced_not_refused(tmp_path, monkeypatch):
    """The identity is the submission's own: one found registered is this job's, from an
    attempt whose answer (and token) was lost; the retry replaces it instead of being
    refused with 409 for ever."""
    from controller.api import ApiServer
    from support.controller_fakes import ADMIN, make_service as make_controller
    from controller.fake_fabric import bring_up

    ctl_svc = bring_up(make_controller("two-rack"))
    api = ApiServer(ctl_svc, "127.0.0.1", 0).start()
    try:
        monkeypatch.setenv("SLUICE_CONTROLLER_TOKEN", ADMIN)
        notifier = ControllerNotifier(api.url, TOPO)
        job = _record(1, "a")
        job = JobRecord(**{**vars(job), "placement": {"ps_hosts": ["h1"],
                                                      "worker_hosts": ["h2", "h3"]}})
        lost = notifier.job_started(job)["SLUICE_CONTROLLER_JOB_TOKEN"]
        env = notifier.job_started(job)                        # the retry
        assert env["SLUICE_CONTROLLER_JOB_TOKEN"] != lost
        assert env[ctl.CONTROLLER_JOB_ENV] == "a.1"
        assert [j["id"] for j in notifier.client.jobs()] == ["a.1"]
    finally:
        api.stop()
