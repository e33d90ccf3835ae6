"""A missing token and a rejected one are told apart, on both services and by the
client commands that relay the answer: 401 "no token given: send Authorization: Bearer
<token> ..." vs 401 "the token given is not ..." (RFC 6750: ``error="invalid_token"``
only then), 403 for a user's own token where the admin token is needed. A scheduler
started without an admin token warns that any user of the host can act on every job."""

from __future__ import annotations

import http.client
import json

import pytest

from controller.api import ApiServer
from controller.client import ControllerClient, ControllerError
from job_scheduler.service.api import SchedulerHTTPServer
from support.controller_api import JOB
from support.controller_fakes import ADMIN, make_service as make_controller
from controller.fake_fabric import bring_up
from support.scheduler_api import TOKEN, job_file, make_service
from support.scheduler_process import ServiceProcess

USER_TOKEN = "alice-token-0123456789abcdef"
USERS = {USER_TOKEN: "nobody"}


def _post(server, path, token=None, body=b"", ctype="application/yaml"):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    headers = {"Content-Type": ctype, "Content-Length": str(len(body))}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", path, body=body, headers=headers)
    resp = conn.getresponse()
    data = json.loads(resp.read() or b"{}")
    conn.close()
    return resp.status, data, resp.getheader("WWW-Authenticate")


# ---- the rule (pure) ---------------------------------------------------------------------

def test_admin_refusal_tells_no_token_wrong_token_and_a_users_token_apart():
    from job_scheduler.service.users import admin_refusal

    assert admin_refusal(TOKEN, TOKEN, USERS) is None
    assert admin_refusal(None, None, USERS) is None            # no admin token: open
    status, missing, headers = admin_refusal(None, TOKEN, {})
    assert status == 401 and missing.startswith("no token given: send Authorization: Bearer")
    assert "admin token" in missing and "SLUICE_SCHEDULER_TOKEN" in missing
    assert headers["WWW-Authenticate"] == 'Bearer realm="sluice-scheduler"'
    status, wrong, headers = admin_refusal("w" * 30, TOKEN, {})
    assert status == 401 and wrong.startswith("the token given is not the scheduler's admin")
    assert 'error="invalid_token"' in headers["WWW-Authenticate"]
    assert "w" * 30 not in wrong                               # never the token itself
    status, users_own, _ = admin_refusal(USER_TOKEN, TOKEN, USERS)
    assert status == 403 and "nobody" in users_own and USER_TOKEN not in users_own
    assert len({missing, wrong, users_own}) == 3


# ---- the scheduler over HTTP, and the client commands ------------------------------------

@pytest.fixture
def scheduler(tmp_path):
    svc = make_service(tmp_path)
    server = SchedulerHTTPServer(("127.0.0.1", 0), svc, token=TOKEN)
    server.users = dict(USERS)
    server.start()
    yield server
    server.stop()
    svc.store.close()


def test_the_scheduler_answers_each_refusal_with_its_own_reason(scheduler):
    status, body, _ = _post(scheduler, "/submissions", TOKEN, job_file("a").encode())
    assert status == 201
    job = body["jobs"][0]
    no, wrong, users = (_post(scheduler, f"/jobs/{job}/cancel", t)
                        for t in (None, "w" * 30, USER_TOKEN))
    assert no[0] == 401 and no[1]["error"].startswith("no token given")
    assert wrong[0] == 401 and wrong[1]["error"].startswith("the token given is not")
    assert "invalid_token" in wrong[2] and "invalid_token" not in no[2]
    assert users[0] == 403 and "user nobody's" in users[1]["error"]
    # a submission with an unknown token: neither the admin's nor a user's
    status, body, _ = _post(scheduler, "/submissions", "x" * 30, job_file("b").encode())
    assert status == 401 and "nor a user's token" in body["error"]
    status, body, _ = _post(scheduler, f"/jobs/{job}/cancel", TOKEN)
    assert status == 200 and body["state"] == "cancelled"


def test_sluice_cancel_relays_which_refusal_it_was(scheduler, capsys, monkeypatch):
    from sluice.cli import main

    monkeypatch.delenv("SLUICE_SCHEDULER_TOKEN", raising=False)
    url = f"http://{scheduler.host}:{scheduler.port}"
    said = {}
    for name, extra in (("none", []), ("wrong", ["--token", "w" * 30])):
        assert main(["cancel", "1", "--server", url, *extra]) == 1
        said[name] = capsys.readouterr().err.strip()
    assert said["none"].startswith("sluice cancel: error: no token given")
    assert "--token or SLUICE_SCHEDULER_TOKEN" in said["none"]
    assert said["wrong"].startswith("sluice cancel: error: the token given is not the "
                                    "scheduler's admin token")
    assert "(--token or SLUICE_SCHEDULER_TOKEN)" in said["wrong"]
    assert all(len(s.splitlines()) == 1 for s in said.values())


# ---- the controller ------------------------------------------------------------------------

@pytest.fixture
def controller():
    api = ApiServer(bring_up(make_controller("two-rack")), "127.0.0.1", 0).start()
    yield api
    api.stop()


def _refused(call) -> ControllerError:
    with pytest.raises(ControllerError) as err:
        call()
    assert err.value.status == 401
    return err.value


def test_the_controller_tells_a_missing_admin_token_from_a_wrong_one(controller):
    no = _refused(lambda: ControllerClient(controller.url, None).register_job(JOB))
    wrong = _refused(lambda: ControllerClient(controller.url, "w" * 30).register_job(JOB))
    assert no.reason.startswith("no token given: send Authorization: Bearer <token> with "
                                "the controller's admin token")
    assert "SLUICE_ADMIN_TOKEN" in no.reason
    assert wrong.reason == "the token given is not the controller's admin token"
    status, _, header = _post(controller, "/jobs", "w" * 30, json.dumps(JOB).encode(),
                              "application/json")
    assert status == 401 and 'error="invalid_token"' in header
    status, _, header = _post(controller, "/jobs", None, json.dumps(JOB).encode(),
                              "application/json")
    assert status == 401 and header == 'Bearer realm="sluice-controller"'


def test_the_controller_tells_a_missing_job_token_from_a_wrong_one(controller):
    admin = ControllerClient(controller.url, ADMIN)
    admin.register_job(JOB)
    no = _refused(lambda: admin.progress("job-a", "w0", 3, None))
    wrong = _refused(lambda: admin.progress("job-a", "w0", 3, "w" * 30))
    assert no.reason.startswith("no token given") and "registration" in no.reason
    assert wrong.reason.startswith("the token given is not job 'job-a''s token")


# ---- started without a token -----------------------------------------------------------------

WARNING = "no admin token: any user of this host can submit jobs and cancel every job"


@pytest.mark.parametrize("token", [None, "a-scheduler-token-0123"])
def test_a_scheduler_without_an_admin_token_warns_that_anyone_can_act(tmp_path, token):
    svc = ServiceProcess(tmp_path, "--slot", "0.2", token=token).start()
    try:
        log = svc.log.read_text()
    finally:
        svc.stop()
    assert "sluice scheduler: listening on" in log
    if token is None:
        assert WARNING in log and "WARNING" in log and "SLUICE_SCHEDULER_TOKEN" in log
    else:
        assert WARNING not in log


def test_a_controller_never_starts_without_an_admin_token(monkeypatch, capsys):
    """(So it has no open mode to warn about: every rule would be anyone's to change.)"""
    from sluice.cli import main

    monkeypatch.delenv("SLUICE_ADMIN_TOKEN", raising=False)
    assert main(["controller", "--api", "127.0.0.1:1", "--ofp-port", "1"]) == 2
    assert "an admin token is required: set SLUICE_ADMIN_TOKEN" in capsys.readouterr().err
