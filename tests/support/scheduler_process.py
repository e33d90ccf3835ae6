"""The scheduler service as its own process (`sluice scheduler`, kill -9 able), and a
polling wait, for the tests that restart or kill it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from job_scheduler.service.client import SchedulerClient, Unreachable
from ps_runtime.ports import free_port
from support.paths import REPO as ROOT


SLUICE = [sys.executable, "-m", "sluice"]


def wait_for(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


class ServiceProcess:
    def __init__(self, tmp_path: Path, *args: str, token: str | None = None):
        self.port = free_port()
        self.db = tmp_path / "sched.db"
        self.args = ["scheduler", "--listen", f"127.0.0.1:{self.port}", "--db", str(self.db),
                     *args]
        self.env = dict(os.environ)
        self.env.pop("SLUICE_SCHEDULER_TOKEN", None)
        if token:
            self.env["SLUICE_SCHEDULER_TOKEN"] = token
        self.log = tmp_path / "service.log"
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> "ServiceProcess":
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(SLUICE + self.args, cwd=ROOT, env=self.env,
                                         stdout=log, stderr=log)
        client = SchedulerClient(self.url, timeout=2)

        def up():
            assert self.proc.poll() is None, self.log.read_text()
            try:
                return client.health()
            except Unreachable:
                return None
        wait_for(up, timeout=20)
        return self

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
