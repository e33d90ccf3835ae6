"""The unit files of deploy/systemd/: checked by systemd, and run by a real systemd.

- ``systemd-analyze verify`` accepts both units without a single warning (it exits 0
  on warnings, so any output fails the test), and ``systemd-analyze security`` rates
  both at most 2.0 ("OK"; the hardening a distribution ships).
- The kill test: a real systemd (tests/support/systemd_sandbox.py: PID 1 of
  its own PID/mount/cgroup namespaces; PID 1 of this machine is no systemd) runs the
  repository's unit files unchanged. While a valid client submits jobs to the scheduler
  and reports progress to the controller, each service's main process is killed with
  SIGSEGV, then SIGKILL (``systemctl kill --kill-whom=main``); systemd must restart it
  on its own, and every job and report the client was told was accepted must still be
  there. The time until /health answers again is printed for each kill.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from bench.api.valid_client import ValidClient
from ps_runtime.ports import free_port
from support.systemd_sandbox import SYSTEMD, SystemdSandbox

from support.paths import REPO as ROOT
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
SYSUSERS = ROOT / "deploy" / "systemd" / "sluice.sysusers.conf"
SCHED_TOKEN = "systemd-test-scheduler-token"
CTL_TOKEN = "systemd-test-controller-token"


def offline_root(tmp_path: Path) -> Path:
    """A root holding the units, the host's own units (the targets they order against)
    and an /opt/sluice/bin/sluice (verify checks that ExecStart is executable)."""
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "opt/sluice/bin").mkdir(parents=True)
    shutil.copytree("/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    shutil.copy(Path(sys.prefix) / "bin" / "sluice", root / "opt/sluice/bin/sluice")
    for unit in UNITS:
        shutil.copy(unit, root / "etc/systemd/system" / unit.name)
    return root


def test_both_units_exist():
    assert [u.name for u in UNITS] == ["sluice-controller.service", "sluice-scheduler.service"]


def test_systemd_analyze_verify_has_nothing_to_say(tmp_path):
    root = offline_root(tmp_path)
    res = subprocess.run(["systemd-analyze", f"--root={root}", "verify",
                          *(str(root / "etc/systemd/system" / u.name) for u in UNITS)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and not (res.stdout + res.stderr).strip(), \
        res.stdout + res.stderr


@pytest.mark.parametrize("unit", [u.name for u in UNITS])
def test_systemd_analyze_security_rates_the_unit_ok(tmp_path, unit):
    root = offline_root(tmp_path)
    # --threshold is on the 0..100 scale the report shows divided by 10: 20 is "2.0"
    res = subprocess.run(["systemd-analyze", "security", "--offline=yes", f"--root={root}",
                          "--threshold=20", "--no-pager",
                          str(root / "etc/systemd/system" / unit)],
                         capture_output=True, text=True, timeout=60)
    summary = [ln for ln in res.stdout.splitlines() if "Overall exposure" in ln]
    assert res.returncode == 0 and summary, res.stdout[-3000:] + res.stderr
    print(summary[0])


def env_files(sched_port: int, ctl_port: int, ofp_port: int) -> dict[str, str]:
    return {
        "scheduler.env": f"SLUICE_SCHEDULER_TOKEN={SCHED_TOKEN}\n"
                         f"SLUICE_SCHEDULER_OPTS=--listen 127.0.0.1:{sched_port}\n",
        "controller.env": f"SLUICE_ADMIN_TOKEN={CTL_TOKEN}\n"
                          f"SLUICE_CONTROLLER_OPTS=--api 127.0.0.1:{ctl_port} "
                          f"--ofp-port {ofp_port}\n",
    }


def wait_health(port: int, timeout_s: float, since: float) -> float:
    """Seconds from ``since`` until GET /health answers 200."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return time.monotonic() - since
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"nothing answered /health on port {port} in {timeout_s} s")


def kill_and_time(box: SystemdSandbox, unit: str, port: int, sig: str) -> dict:
    """Kill the unit's main process with ``sig``; the new main PID and the seconds until
    /health answers again."""
    before = box.show(unit, "MainPID"), int(box.show(unit, "NRestarts"))
    t0 = time.monotonic()
    box.systemctl("kill", "--kill-whom=main", f"--signal={sig}", unit, check=True)
    # the old process must be gone before /health counts (it may still answer a moment)
    deadline = t0 + 10
    while box.show(unit, "MainPID") == before[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    seconds = wait_health(port, 30, t0)
    after = box.show(unit, "MainPID"), int(box.show(unit, "NRestarts"))
    return {"unit": unit, "signal": sig, "answers_after_s": seconds,
            "main_pid": (before[0], after[0]), "restarts": (before[1], after[1])}


def sandbox_preconditions() -> None:
    """Fail (never skip) with what is missing: the kill test needs root and systemd."""
    assert os.geteuid() == 0, "the systemd kill test needs root (make test runs as root)"
    assert SYSTEMD.exists() and shutil.which("systemd-sysusers"), \
        "systemd is not installed: `make system` installs Debian's package"
    # the service user must be able to read the checkout and its venv (both bind-mounted
    # under /opt in the sandbox, so where the checkout lives does not matter)
    for part in (ROOT, Path(sys.prefix)):
        assert part.stat().st_mode & 0o005 == 0o005, \
            f"{part} is not readable by other users: the service user cannot run sluice"


@pytest.mark.slow
def test_killed_services_come_back_on_their_own_and_lose_nothing(tmp_path):
    sandbox_preconditions()
    sp, cp, op = free_port(), free_port(), free_port()
    box = SystemdSandbox(tmp_path, UNITS, SYSUSERS, Path(sys.prefix),
                         env_files(sp, cp, op), repo=ROOT)
    box.start()
    try:
        box.systemctl("start", *(u.name for u in UNITS), check=True)
        for port in (sp, cp):
            wait_health(port, 60, time.monotonic())
        assert box.show("sluice-scheduler.service", "User") == "sluice"
        client = ValidClient(f"http://127.0.0.1:{sp}", SCHED_TOKEN,
                             f"http://127.0.0.1:{cp}", CTL_TOKEN, period_s=0.05)
        client.register()
        client.start()
        kills = []
        for unit, port in (("sluice-scheduler.service", sp), ("sluice-controller.service", cp)):
            for sig in ("SIGSEGV", "SIGKILL"):
                time.sleep(1.5)                  # the client submits/reports meanwhile
                kills.append(kill_and_time(box, unit, port, sig))
        time.sleep(1.5)
        client.stop()
        for k in kills:
            print(f"{k['unit']} {k['signal']}: answers again after {k['answers_after_s']:.2f} s "
                  f"(main PID {k['main_pid'][0]} -> {k['main_pid'][1]}, "
                  f"restarts {k['restarts'][0]} -> {k['restarts'][1]})")
            assert k["main_pid"][0] != k["main_pid"][1] and k["restarts"][1] == k["restarts"][0] + 1
        tally = client.tally
        print(f"valid client: {len(tally.accepted_jobs)} jobs accepted, batches acked "
              f"{tally.acked_batch}, failures while a service was down {tally.failures}")
        assert len(tally.accepted_jobs) > 20 and sum(tally.acked_batch.values()) > 20
        assert client.lost() == {"jobs": [], "batches": []}
        for unit in UNITS:
            assert box.show(unit.name, "ActiveState") == "active", box.log(unit.name)[-3000:]
    finally:
        box.close()
