"""``sluice``'s main: a user's bad input ends in one line per problem and exit 2; an error
of the machine (no fabric, no Slurm, a path it may not write) in one line and exit 1; any
other exception is a bug and keeps its traceback (SLUICE_TRACEBACK=1: every one does)."""

from __future__ import annotations

import sys
import types

import pytest

from sluice import cli
from sluice_common.errors import InputError


def _command(monkeypatch, raised: BaseException) -> None:
    module = types.ModuleType("sluice_test_boom")
    module.configure_boom = lambda parser: None

    def run_boom(args):
        raise raised
    module.run_boom = run_boom
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(cli.COMMANDS, "boom", (module.__name__, "raises"))


def _errors():
    from mininet_fabric.lock import FabricError
    from slurm_client.client import SlurmUnavailable

    return [(InputError("jobs.yaml", "no jobs", field="jobs"), 2,
             "sluice boom: error: jobs.yaml: field 'jobs': no jobs"),
            (FabricError("Open vSwitch is not running"), 1,
             "sluice boom: error: Open vSwitch is not running"),
            (SlurmUnavailable("sinfo", "Unable to contact slurm controller"), 1,
             "sluice boom: error: `sinfo`: Unable to contact slurm controller"),
            (PermissionError(13, "Permission denied", "/srv/out"), 1,
             "sluice boom: error: /srv/out: Permission denied")]


@pytest.mark.parametrize("case", range(4))
def test_user_and_machine_errors_end_in_one_line(monkeypatch, capsys, case):
    raised, code, line = _errors()[case]
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    _command(monkeypatch, raised)
    assert cli.main(["boom"]) == code
    assert capsys.readouterr().err.splitlines() == [line]


def test_a_bug_keeps_its_traceback(monkeypatch):
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    _command(monkeypatch, KeyError("a bug"))
    with pytest.raises(KeyError):
        cli.main(["boom"])
    _command(monkeypatch, OSError("no file named"))    # an OSError without a path: a bug
    with pytest.raises(OSError):
        cli.main(["boom"])


def test_sluice_traceback_shows_every_one(monkeypatch):
    from mininet_fabric.lock import FabricError

    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    _command(monkeypatch, FabricError("Open vSwitch is not running"))
    with pytest.raises(FabricError):
        cli.main(["boom"])



def test_a_reader_that_goes_away_ends_the_command_quietly(monkeypatch, capsys):
    """`sluice simulate ... | head`: the pipe closes while sluice still writes; the command
    ends with 141 (as a shell reports SIGPIPE), says nothing and shows no traceback, and
    its stdout is pointed at /dev/null so the interpreter's last flush stays quiet."""
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    _command(monkeypatch, BrokenPipeError(32, "Broken pipe"))
    pointed = []
    monkeypatch.setattr(cli.os, "dup2", lambda fd, to: pointed.append(to))
    monkeypatch.setattr(cli.sys.stdout, "fileno", lambda: 1, raising=False)
    assert cli.main(["boom"]) == 141
    assert capsys.readouterr().err == ""
    assert pointed == [1]
