"""Warm processes forked from one fork server per host (``ps_runtime.zygote``, for
the demo's wall time): they become a job's processes as imported ones do, their exit
status and signals reach the launcher through the zygote, and no process is started
cold when a pool runs dry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ps_runtime.ports import free_port_block as free_base
from ps_runtime.runners import LocalRunner, kill_group
from ps_runtime.warm import WarmRunner
from ps_runtime.zygote import parse_report
from support.ps_jobs import run_tiny_emulated_job


def test_report_lines_in_order_a_partial_line_kept_and_noise_skipped():
    events, rest = parse_report(b"ready\npid 12\nsome warning\nexit 12 -15\npid 13\nexit 1")
    assert events == [("pid", 12, None), ("exit", 12, -15), ("pid", 13, None)]
    assert rest == b"exit 1"
    events, rest = parse_report(rest + b"4 0\n")
    assert events == [("exit", 14, 0)] and rest == b""


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.fixture
def runner():
    r = WarmRunner(LocalRunner(), ["local"], per_host=2, fork=True, refill=False)
    try:
        yield r
    finally:
        r.close()


def test_forked_processes_run_a_job_and_a_dry_pool_forks_instead_of_starting_cold(
        runner, tmp_path):
    assert runner.wait_ready(timeout=120) == 2
    zygote = runner.zygotes["local"]
    pool = list(runner.idle["local"])
    assert {_parent(p.pid) for p in pool} == {zygote.proc.pid}   # forked, not imported
    job, result = run_tiny_emulated_job(runner, tmp_path, "t-fork")
    assert set(result.returncodes.values()) == {0}
    assert [r.batch for r in result.batches[0]] == [1, 2, 3]
    # three processes (scheduler, server, worker) from a pool of two: one forked late
    assert (runner.taken, runner.forked_late, runner.cold) == (3, 1, 0)
    assert {p.pid for p in pool} <= {p.popen.pid for p in job.processes}


def test_exit_status_and_signals_reach_the_launcher_through_the_zygote(runner, tmp_path):
    assert runner.wait_ready(timeout=120) == 2
    argv = [sys.executable, "-m", "ps_runtime.server"]
    with open(tmp_path / "bad.log", "wb") as log:
        bad = runner.start("local", argv, {"DMLC_ROLE": "nobody"}, log)
    assert bad.wait(timeout=60) == 2              # the module's own exit status
    assert "DMLC_ROLE must be server or scheduler" in (tmp_path / "bad.log").read_text()
    # a scheduler with no peers waits for ever: stopped by its process group
    env = {"DMLC_ROLE": "scheduler", "DMLC_PS_ROOT_URI": "127.0.0.1",
           "DMLC_PS_ROOT_PORT": str(free_base()), "DMLC_NUM_SERVER": "1",
           "DMLC_NUM_WORKER": "1", "DMLC_NODE_HOST": "127.0.0.1"}
    with open(tmp_path / "hang.log", "wb") as log:
        hang = runner.start("local", argv, env, log)
    with pytest.raises(subprocess.TimeoutExpired):
        hang.wait(timeout=1)
    assert os.getpgid(hang.pid) == hang.pid       # its own session, as Popen's are
    kill_group(hang)
    assert hang.wait(timeout=30) == -signal.SIGTERM
