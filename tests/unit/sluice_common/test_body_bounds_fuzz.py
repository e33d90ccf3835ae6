"""Property-based fuzzing of the job-file parser and of both services' request
bodies (tests/support/hostile_fuzz.py: nesting past every recursion limit, huge and non-finite
numbers, long strings, binary, YAML tags, anchors and aliases). Whatever comes in, the
parser refuses it with an InputError (nothing else escapes), and each service answers a
2xx or a bounded 4xx (at most 64 KB, within 3 s) and stays up. Crashes the fuzz found
stay as named regressions in tests/unit/project/test_hostile_bodies.py (real processes)."""

from __future__ import annotations

import http.client
import json
import sys
import time

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api import ApiServer, JobRegistration, ProgressReport
from support.controller_fakes import ADMIN, make_service as make_controller
from controller.fake_fabric import bring_up
from support.hostile_fuzz import job_files, json_bodies, nested
from job_scheduler.service.api import SchedulerHTTPServer
from sluice_common.body_bounds import LIMITS, BoundsError, YamlEventBounds, check_json
from sluice_common.errors import InputError
from sluice_common.jobspec import parse_jobs_text
from support.scheduler_api import TOKEN as SCHEDULER_TOKEN, make_service as make_scheduler

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))
MAX_ANSWER = 64 * 1024
MAX_SECONDS = 3.0


@FUZZ
@given(job_files())
def test_the_job_file_parser_refuses_with_an_input_error_only(text):
    try:
        parse_jobs_text(text, "fuzz.yaml", max_jobs=10_000)
    except InputError as err:
        assert err.source == "fuzz.yaml" and len(str(err)) < 100_000


# what the fuzz found on f05a1b5: a ValueError escaped the parser (the service answered
# 503 "retry later" to a bad file, `sluice run` printed a traceback)
@pytest.mark.parametrize("text", [
    "jobs: [{name: !!timestamp 2020-13-45}]",
    "jobs: [{name: a, dataset_size: " + "9" * 4400 + "}]",
    "jobs: [{name: a, dataset_size: !!int '" + "9" * 4200 + "'}]",
    "jobs: [{name: a, arrival: !!float '1e999'}]"],
    ids=["bad-timestamp", "4400-digits", "tagged-4200-digits", "tagged-infinity"])
def test_what_the_fuzz_found_is_an_input_error(text):
    with pytest.raises(InputError):
        parse_jobs_text(text, "fuzz.yaml", max_jobs=10)


@FUZZ
@given(json_bodies())
def test_a_json_body_within_the_bounds_never_reaches_a_parser_limit(body):
    try:
        check_json(body)
    except BoundsError:
        return
    try:
        json.loads(body)              # a ValueError (not JSON) is fine; a RecursionError not
    except ValueError:
        pass
    for model in (JobRegistration, ProgressReport):
        try:
            model.model_validate_json(body)
        except ValueError as err:
            assert "recursion" not in str(err), err


# (the root mapping is one level: `jobs:` + 31 `[` is 32 deep)
@pytest.mark.parametrize("depth", [LIMITS.depth - 1, LIMITS.depth, 50_000])
def test_the_pure_python_yaml_events_do_not_recurse(depth):
    """Without libyaml, the bounds walk PyYAML's own parser: a state machine with a
    stack of its own, so a 50,000-deep document is refused under a recursion limit of
    200 (a recursive walk would die long before)."""
    text = "jobs: " + "[" * depth + "]" * depth
    loader = yaml.SafeLoader(text)
    walker = YamlEventBounds(loader)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        with pytest.raises(BoundsError) if depth >= LIMITS.depth else _nothing():
            while not loader.check_event(yaml.StreamEndEvent):
                walker.event(loader.get_event())
    finally:
        sys.setrecursionlimit(old)
        loader.dispose()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---- both services, in process on real uvicorn servers --------------------------------

@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    svc = make_scheduler(tmp_path_factory.mktemp("fuzz"))
    scheduler = SchedulerHTTPServer(("127.0.0.1", 0), svc, token=SCHEDULER_TOKEN).start()
    controller = ApiServer(bring_up(make_controller("two-rack", rate_per_s=10**6)),
                           "127.0.0.1", 0).start()
    yield scheduler, controller
    scheduler.stop()
    controller.stop()
    svc.store.close()


def post(server, path: str, body: bytes, headers: dict) -> tuple[int, bytes, float]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    t0 = time.monotonic()
    conn.request("POST", path, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data, time.monotonic() - t0


def assert_bounded(status: int, data: bytes, took: float, server) -> None:
    assert status < 300 or 400 <= status < 500, (status, data[:300])
    assert len(data) <= MAX_ANSWER and took <= MAX_SECONDS, (len(data), took)
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200
    conn.close()


@FUZZ
@given(text=job_files(), ctype=st.sampled_from(["application/yaml", "application/json", ""]))
def test_the_scheduler_answers_any_job_file_with_a_bounded_answer(servers, text, ctype):
    scheduler = servers[0]
    headers = {"Authorization": f"Bearer {SCHEDULER_TOKEN}",
               **({"Content-Type": ctype} if ctype else {})}
    body = text.encode("utf-8", "surrogatepass")
    assert_bounded(*post(scheduler, "/submissions", body, headers), scheduler)


@FUZZ
@given(body=json_bodies(), route=st.sampled_from(["/jobs", "/rank", "/jobs/job-a/progress"]))
def test_the_controller_answers_any_body_with_a_bounded_answer(servers, body, route):
    controller = servers[1]
    headers = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}
    assert_bounded(*post(controller, route, body, headers), controller)


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(nested())
def test_nested_bodies_in_every_route(servers, value):
    scheduler, controller = servers
    yaml_headers = {"Authorization": f"Bearer {SCHEDULER_TOKEN}",
                    "Content-Type": "application/yaml"}
    assert_bounded(*post(scheduler, "/submissions", f"jobs: {value}".encode(), yaml_headers),
                   scheduler)
    body = value.replace("{a: ", '{"a": ').encode()[:60_000]
    for route in ("/jobs", "/rank", "/jobs/job-a/progress"):
        assert_bounded(*post(controller, route, body, {
            "Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}),
            controller)
