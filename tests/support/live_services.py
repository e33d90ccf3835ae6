"""Both REST services as real processes (`sluice scheduler`, `sluice controller` with no
switch connected), with admin tokens, on free loopback ports: what a site runs. Used by
the schemathesis run and the hostile-body regressions (a crash there is a dead process,
which an in-process test would only see as a dead pytest)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from ps_runtime.ports import free_port

from support.paths import REPO as ROOT
SCHEDULER_TOKEN = "live-scheduler-admin-token"
CONTROLLER_TOKEN = "live-controller-admin-token"


def start(args: list[str], env: dict, log: Path, url: str) -> subprocess.Popen:
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sluice", *args], cwd=ROOT, env=env,
                                stdout=out, stderr=out)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"{args[0]} did not come up: {log.read_text()}")


@contextmanager
def live_services(tmp_path: Path, scheduler_token: str = SCHEDULER_TOKEN,
                  controller_token: str = CONTROLLER_TOKEN):
    """{"scheduler": url, "controller": url, "procs": {name: Popen}} while both run."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLUICE_SCHEDULER_TOKEN", "SLUICE_ADMIN_TOKEN")}
    sched_port, ctl_port, ofp_port = free_port(), free_port(), free_port()
    urls = {"scheduler": f"http://127.0.0.1:{sched_port}",
            "controller": f"http://127.0.0.1:{ctl_port}"}
    procs: dict[str, subprocess.Popen] = {}
    try:
        procs["scheduler"] = start(
            ["scheduler", "--listen", f"127.0.0.1:{sched_port}", "--db",
             str(tmp_path / "jobs.db"), "--slot", "0.2"],
            {**env, "SLUICE_SCHEDULER_TOKEN": scheduler_token},
            tmp_path / "scheduler.log", urls["scheduler"])
        procs["controller"] = start(
            ["controller", "--api", f"127.0.0.1:{ctl_port}", "--ofp-port", str(ofp_port),
             "--state-file", str(tmp_path / "controller.json")],
            {**env, "SLUICE_ADMIN_TOKEN": controller_token},
            tmp_path / "controller.log", urls["controller"])
        yield {**urls, "procs": procs}
    finally:
        for proc in procs.values():
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
