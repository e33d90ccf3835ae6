"""A progress report is checked and recorded in one step: the job, its token, the worker
and the rate limit are judged against the job as it is when the report is recorded
(controller/auth.py + ControllerService._record under its report lock)."""

import threading

import pytest

from controller.api import status_of
from controller.auth import token_sha
from controller.errors import Refused
from support.controller_fakes import ADMIN, make_service, northbound
from controller.fake_fabric import bring_up

JOB_A = {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
         "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001}]}


def status(call):
    with pytest.raises(Refused) as err:
        call()
    return status_of(err.value)


def test_a_report_checked_against_a_job_re_registered_meanwhile_is_not_recorded_on_it():
    """Force the interleaving: the job is removed and registered again (a new token) after
    the report's token was checked and before the report is recorded. The report must
    not land on the new job (it carries the old job's token)."""
    svc = bring_up(make_service())
    guard = northbound(svc)
    old = guard.register_job(ADMIN, JOB_A)["token"]
    new_token: list[str] = []
    charge = guard.limiter.admit            # called between the token check and the record

    def re_register_meanwhile(key):
        def swap():
            guard.remove_job(ADMIN, "job-a")
            new_token.append(guard.register_job(ADMIN, JOB_A)["token"])
        t = threading.Thread(target=swap)
        t.start()
        # Where check and record are one step the swap waits for it (a lock); give it
        # time to run in between wherever the code lets it.
        t.join(0.5)
        re_register_meanwhile.thread = t
        return charge(key)

    guard.limiter.admit = re_register_meanwhile
    try:
        answer = guard.progress("job-a", old, {"worker": "w0", "batch": 5})[0]
        assert answer["result"] == "accepted"          # recorded on the old job
    except Refused as err:
        assert status_of(err) == 401                    # or refused: the token is gone
    guard.limiter.admit = charge
    re_register_meanwhile.thread.join(5)
    assert new_token, "the job was not registered again"
    assert svc.registry.jobs["job-a"].batches == {}, "the old token's report landed on the new job"
    assert status(lambda: guard.progress("job-a", old, {"worker": "w0", "batch": 6})) == 401
    assert guard.progress("job-a", new_token[0], {"worker": "w0", "batch": 1})[0][
        "result"] == "accepted"


def test_the_service_compares_the_credential_it_is_handed_when_it_records():
    svc = bring_up(make_service())
    guard = northbound(svc)
    old = guard.register_job(ADMIN, JOB_A)["token"]
    guard.remove_job(ADMIN, "job-a")
    guard.register_job(ADMIN, JOB_A)
    for credential in (token_sha(old), ""):
        assert status(lambda: svc.progress("job-a", {"worker": "w0", "batch": 1},
                                           credential=credential)) == 401
    assert status(lambda: svc.progress("nope", {"worker": "w0", "batch": 1},
                                       credential=token_sha(old))) == 404
    assert svc.registry.jobs["job-a"].batches == {}


def test_refused_reports_do_not_use_up_the_jobs_rate():
    """Reports naming unknown workers, with a wrong or no token, for an unknown job or with
    a bad batch are refused without charging the job's bucket."""
    now = [0.0]
    svc = bring_up(make_service(rate_per_s=2))
    svc.clock = lambda: now[0]
    guard = northbound(svc)
    tok = guard.register_job(ADMIN, JOB_A)["token"]
    for _ in range(5):
        assert status(lambda: guard.progress("job-a", tok, {"worker": "w9", "batch": 1})) == 422
        assert status(lambda: guard.progress("job-a", tok, {"worker": "w0", "batch": -1})) == 400
        assert status(lambda: guard.progress("job-a", "wrong", {"worker": "w0", "batch": 1})) == 401
        assert status(lambda: guard.progress("job-a", None, {"worker": "w0", "batch": 1})) == 401
        assert status(lambda: guard.progress("nope", tok, {"worker": "w0", "batch": 1})) == 404
    for b in (1, 2):                 # the same instant: the bucket is still full
        assert guard.progress("job-a", tok, {"worker": "w0", "batch": b})[0]["result"] == "accepted"
    assert status(lambda: guard.progress("job-a", tok, {"worker": "w0", "batch": 3})) == 429
    assert svc.registry.jobs["job-a"].batches == {"w0": 2}      # the 429 recorded nothing
    # the same through the batch hand-over the API uses
    now[0] += 1.0
    out = guard.progress_many([("job-a", tok, {"worker": "w9", "batch": 3}, 0.0, None)] * 4
                              + [("job-a", tok, {"worker": "w0", "batch": b}, 0.0, None)
                                 for b in (3, 4, 5)])
    assert [status_of(o) if isinstance(o, Refused) else o[0]["result"] for o in out] == \
        [422] * 4 + ["accepted", "accepted", 429]
    assert svc.registry.jobs["job-a"].batches == {"w0": 4}
