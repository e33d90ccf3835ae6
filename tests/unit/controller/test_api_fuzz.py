"""The controller's northbound API under fuzzed bodies (hypothesis, in process): every
answer is an allowed status with a JSON body, and a refusal changes nothing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from controller.api import ApiServer
from controller.client import ControllerClient
from support.controller_api import JOB as API_JOB, raw
from support.controller_fakes import ADMIN as FAKE_ADMIN, make_service
from controller.fake_fabric import bring_up


# ============================================================ API body fuzzing ======
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                   max_size=4),
    max_leaves=12)
ENDPOINT = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=6), JSON), "ip": st.sampled_from(
        ["10.0.0.1", "10.0.0.3", "10.0.0.9", "1.2.3", "", "10.0.0.256"]) | JSON,
     "port": st.integers(-5, 70000) | JSON})
JOB_LIKE = st.fixed_dictionaries(
    {"id": st.from_regex(r"[A-Za-z0-9._-]{0,70}", fullmatch=True) | JSON},
    optional={"servers": st.lists(ENDPOINT, max_size=3) | JSON,
              "workers": st.lists(ENDPOINT, max_size=3) | JSON, "extra": JSON})
PROGRESS_LIKE = st.fixed_dictionaries(
    {}, optional={"worker": st.sampled_from(["w0", "w1", "w9", ""]) | JSON,
                  "batch": st.integers(-3, 2**70) | st.floats() | JSON, "extra": JSON})


def encode(value) -> bytes:
    return json.dumps(value).encode()


# near-valid bodies too, so that the accepting paths (and 409) are exercised
VALID_PROGRESS = st.fixed_dictionaries({"worker": st.sampled_from(["w0", "w1"]),
                                        "batch": st.integers(0, 10**6)})
VALID_JOB = st.builds(
    lambda job_id, port, n: {"id": job_id,
                             "servers": [{"id": "s0", "ip": "10.0.0.4", "port": port}],
                             "workers": [{"id": f"w{i}", "ip": f"10.0.0.{i + 1}", "port": port}
                                         for i in range(n)]},
    st.sampled_from(["job-a", "job-b", "j.1", "x" * 64, "x" * 65]),
    st.integers(10000, 60000), st.integers(0, 2))
BODY = st.one_of(JSON.map(encode), JOB_LIKE.map(encode), PROGRESS_LIKE.map(encode),
                 VALID_PROGRESS.map(encode), VALID_JOB.map(encode), st.binary(max_size=200),
                 VALID_PROGRESS.map(encode), VALID_JOB.map(encode))
ALLOWED = {200, 201, 400, 401, 404, 409, 413, 429}


@pytest.fixture(scope="module")
def fuzz_api():
    svc = bring_up(make_service("two-rack", rate_per_s=1e6))
    api = ApiServer(svc, "127.0.0.1", 0).start()
    token = ControllerClient(api.url, FAKE_ADMIN).register_job(API_JOB)["token"]
    yield api, token
    api.stop()


def jobs_state(api) -> list:
    status, data = raw(api, "GET", "/jobs")
    assert status == 200
    return json.loads(data)["jobs"]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(target=st.sampled_from(["/jobs", "/jobs/job-a/progress", "/jobs/nope/progress"]),
       body=BODY, auth=st.sampled_from(["good", "good", "good", "none", "bad"]))
def test_fuzzed_bodies_never_break_the_api(fuzz_api, target, body, auth):
    api, job_token = fuzz_api
    token = {"good": FAKE_ADMIN if target == "/jobs" else job_token, "none": None,
             "bad": "not-a-token"}[auth]
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    before = jobs_state(api)
    # raw() opens a fresh connection; a dropped connection raises here and fails the test
    status, data = raw(api, "POST", target, body, headers)
    event(f"{target} -> {status}")     # --hypothesis-show-statistics shows the mix
    assert status in ALLOWED, (status, data)
    answer = json.loads(data)           # every answer, refusals included, is JSON
    after = jobs_state(api)
    if status >= 300:
        assert after == before, (status, answer)
        assert answer["status"] == status and answer["error"]
    elif target == "/jobs":            # a fuzzed body that happens to be a valid job
        assert answer["id"] in [j["id"] for j in after]
        assert raw(api, "DELETE", f"/jobs/{answer['id']}",
                   headers={"Authorization": f"Bearer {FAKE_ADMIN}"})[0] == 200
        assert jobs_state(api) == before
    else:                              # a valid progress report: only job-a's batches moved
        assert [j["id"] for j in after] == [j["id"] for j in before]
