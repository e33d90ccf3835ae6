"""Users' own identity without Slurm: the token -> Unix user file
(``--users``), a submission made with a user's token recorded as that user's (the API
and ``sluice jobs``), the admin token as the service's account, any other token refused;
the sbatch flags and run directory of a user's job."""

from __future__ import annotations

import json
import os
import pwd

import pytest

from job_scheduler.service.slurm_identity import identity, submit_as
from job_scheduler.service.users import UnixUser, load_users, parse_users, user_of
from sluice_common.errors import InputError
from support.scheduler_api import AUTH, TOKEN, call, job_file, make_service

ALICE = "nobody"        # a user every Debian has (the fabric tests use make slurm's)
ALICE_TOKEN = "alice-token-0123456789abcdef"


def test_users_file_maps_tokens_to_unix_users(tmp_path):
    path = tmp_path / "users.yaml"
    path.write_text(f"users:\n  - {{name: {ALICE}, token: {ALICE_TOKEN}}}\n")
    users = load_users(path)
    assert users == {ALICE_TOKEN: ALICE}
    assert user_of(ALICE_TOKEN, users) == ALICE and user_of("other" * 6, users) is None


@pytest.mark.parametrize("data,where,field,reason", [
    ({"users": [{"name": "no-such-user-xyz", "token": ALICE_TOKEN}]}, "users[0]", "name",
     "no Unix user"),
    ({"users": [{"name": "root", "token": ALICE_TOKEN}]}, "users[0]", "name", "root"),
    ({"users": [{"name": ALICE, "token": "short"}]}, "users[0]", "token", "at least"),
    ({"users": [{"name": ALICE, "token": ALICE_TOKEN}, {"name": "daemon",
                                                         "token": ALICE_TOKEN}]},
     "users[1]", "token", "the same token"),
    ({"users": [{"name": ALICE}]}, "users[0]", None, "each entry"),
    ({"people": []}, None, "users", "a list 'users'"),
])
def test_bad_users_file_names_the_entry_and_field(data, where, field, reason):
    with pytest.raises(InputError) as err:
        parse_users(data, "users.yaml")
    assert err.value.source == "users.yaml" and err.value.element == where
    assert err.value.field == field and reason in err.value.reason


def test_a_users_token_submits_as_that_user_admin_as_the_service(tmp_path):
    from job_scheduler.service.api import SchedulerHTTPServer

    svc = make_service(tmp_path)
    server = SchedulerHTTPServer(("127.0.0.1", 0), svc, token=TOKEN)
    server.users = {ALICE_TOKEN: ALICE}
    server.start()
    try:
        yaml_type = {"Content-Type": "application/yaml"}
        status, _ = call(server, "POST", "/submissions", job_file("mine").encode(),
                         {**yaml_type, "Authorization": f"Bearer {ALICE_TOKEN}"})
        assert status == 201
        status, _ = call(server, "POST", "/submissions", job_file("ops").encode(),
                         {**yaml_type, **AUTH})
        assert status == 201
        status, _ = call(server, "POST", "/submissions", job_file("x").encode(),
                         {**yaml_type, "Authorization": "Bearer " + "w" * 30})
        assert status == 401
        status, body = call(server, "GET", "/jobs")
        users = {j["name"]: j["user"] for j in json.loads(body)["jobs"]}
        assert users == {"mine": ALICE, "ops": None}
    finally:
        server.stop()
        svc.store.close()


def test_a_users_job_gets_its_identity_and_owns_its_run_dir(tmp_path):
    run = tmp_path / "job-1-attempt-1"
    run.mkdir()
    (run / "plan.json").write_text("{}")
    flags, env = submit_as(ALICE, run)
    pw = pwd.getpwnam(ALICE)
    assert flags == (f"--uid={ALICE}", f"--gid={UnixUser.of(ALICE).group}")
    assert env == {"HOME": pw.pw_dir, "USER": ALICE, "LOGNAME": ALICE}
    assert os.stat(run).st_uid == os.stat(run / "plan.json").st_uid == pw.pw_uid
    assert identity(UnixUser.of(ALICE))[0] == flags
    with pytest.raises(KeyError):
        submit_as("no-such-user-xyz", run)
