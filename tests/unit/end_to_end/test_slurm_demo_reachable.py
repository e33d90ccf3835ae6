"""``sluice demo --executor slurm --out DIR`` with a DIR the jobs' user cannot reach ends
before anything starts, in one line naming the user, each directory and the permission
to add (exit 2), not in a traceback; a service that refuses to start is told the same way."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest

from end_to_end import slurm_demo
from end_to_end.controller_proc import wait_healthy
from sluice_common.errors import InputError

# a user every Debian has (make slurm's sluice-alice may not exist where unit tests run)
USER = "nobody"
NOBODY = pwd.getpwnam(USER)


def _private(tmp_path: Path) -> Path:
    private = tmp_path / "private"
    private.mkdir()
    private.chmod(0o700)
    return private


def test_can_enter_reads_the_owner_the_group_or_the_others_bits(tmp_path):
    from end_to_end.slurm_demo import can_enter

    d = tmp_path / "d"
    d.mkdir()
    others = NOBODY.pw_uid
    group = os.stat(d).st_gid
    for mode, gids, expected in ((0o701, set(), True), (0o770, set(), False),
                                 (0o710, {group}, True), (0o707, {group}, False)):
        d.chmod(mode)
        assert can_enter(d, others, gids) is expected, oct(mode)
    d.chmod(0o000)
    assert can_enter(d, 0, set())                      # root enters anything


def test_blocked_directories_name_the_closed_ones_not_those_yet_to_be_made(tmp_path):
    from end_to_end.slurm_demo import blocked_directories

    private = _private(tmp_path)
    out = private / "out" / "deeper"                 # neither exists yet
    blocked = blocked_directories(out, NOBODY.pw_uid, {NOBODY.pw_gid})
    assert private in blocked
    assert all(d.exists() for d in blocked) and out not in blocked
    private.chmod(0o701)
    assert private not in blocked_directories(out, NOBODY.pw_uid, {NOBODY.pw_gid})


def test_directories_the_cluster_opens_for_its_users_are_not_blocked(tmp_path):
    from end_to_end.slurm_demo import blocked_directories

    private = _private(tmp_path)
    repo = private / "repo"                          # a checkout the bring-up opens (o+x)
    repo.mkdir()
    out = repo / "runs" / "demo"
    assert private in blocked_directories(out, NOBODY.pw_uid, set())
    opened = blocked_directories(out, NOBODY.pw_uid, set(), opened=[repo])
    assert private not in opened


def test_sluice_demo_slurm_with_an_unreachable_out_exits_2_in_one_line(tmp_path, capsys,
                                                                       monkeypatch):
    import mininet_fabric.lock
    from sluice.cli import main

    def started(*args, **kwargs):       # the check must come first: fail, start nothing
        raise AssertionError("the demo went on to take the fabric lock")
    monkeypatch.setattr(mininet_fabric.lock, "FabricLock", started)
    monkeypatch.setattr(slurm_demo, "DEMO_USER", USER)
    private = _private(tmp_path)
    out = private / "out"
    assert main(["demo", "--executor", "slurm", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    line = lines[0]
    assert line.startswith("sluice demo: error: argument --out: user nobody cannot enter ")
    assert f"{private} (mode 0700)" in line and "o+x" in line
    assert "chmod o+x" in line and str(private) in line.split("chmod o+x", 1)[1]
    assert not out.exists()                           # nothing was made or started


def test_an_unknown_jobs_user_is_an_error_of_the_machine(tmp_path):
    from mininet_fabric.lock import FabricError

    with pytest.raises(FabricError, match="make slurm"):
        slurm_demo.check_out_reachable(tmp_path, user="no-such-user-xyz")


# ---- a service that refuses to start ---------------------------------------------------------

SAID = ("2026-12-01 10:00:00 sluice.scheduler INFO starting\n"
        "sluice scheduler: error: argument --users: user sluice-alice cannot enter /srv/x "
        "(every directory above it needs o+x)\n")


def test_refusal_lines_are_the_reasons_a_sluice_command_gave():
    from end_to_end.controller_proc import refusal_lines

    assert refusal_lines(SAID) == ["argument --users: user sluice-alice cannot enter /srv/x "
                                   "(every directory above it needs o+x)"]
    assert refusal_lines("Traceback (most recent call last):\nValueError: error: x\n") == []


class _Down:
    def health(self):
        raise OSError("connection refused")


@pytest.mark.parametrize("code", [2, 1])
def test_wait_healthy_turns_a_refusal_into_input_error_and_a_crash_into_error(tmp_path,
                                                                              code):
    log = tmp_path / "scheduler.log"
    log.write_text(SAID)
    proc = subprocess.Popen(["sh", "-c", f"exit {code}"])
    proc.wait()
    if code == 2:
        with pytest.raises(InputError) as err:
            wait_healthy(_Down(), proc, log, 5.0, "the scheduler")
        assert str(err.value).startswith("the scheduler refused to start: argument --users: "
                                         "user sluice-alice cannot enter /srv/x")
    else:
        with pytest.raises(RuntimeError, match="exited with 1"):
            wait_healthy(_Down(), proc, log, 5.0, "the scheduler")
