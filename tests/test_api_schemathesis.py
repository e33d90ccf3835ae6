"""Both REST services against their own OpenAPI documents, with schemathesis (issue 30).

The real services are started as processes (`sluice scheduler`, `sluice controller` with
no switch connected) with admin tokens on free loopback ports; schemathesis runs every
operation of each document through all its phases (examples, coverage, fuzzing and the
stateful phase that follows the documents' links) with every check, at most
``MAX_EXAMPLES`` generated cases per operation, and must find nothing. The run is
seeded, so CI sees the same cases every time; ``SLUICE_SCHEMATHESIS_SEED`` picks another.
tests/api_schemathesis_{scheduler,controller}.toml hold the one documented exception
of each.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ps_runtime.ports import free_port

pytestmark = pytest.mark.slow        # about two minutes for both services (`make test` runs it)

ROOT = Path(__file__).resolve().parents[1]
ST = Path(sys.executable).with_name("st")
MAX_EXAMPLES = int(os.environ.get("SLUICE_SCHEMATHESIS_EXAMPLES", "200"))
SEED = os.environ.get("SLUICE_SCHEMATHESIS_SEED", "30")
SCHEDULER_TOKEN = "schemathesis-scheduler-token"
CONTROLLER_TOKEN = "schemathesis-controller-token"


def _start(args: list[str], env: dict, log: Path, url: str) -> subprocess.Popen:
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


@pytest.fixture
def services(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLUICE_SCHEDULER_TOKEN", "SLUICE_ADMIN_TOKEN")}
    sched_port, ctl_port, ofp_port = free_port(), free_port(), free_port()
    urls = {"scheduler": f"http://127.0.0.1:{sched_port}",
            "controller": f"http://127.0.0.1:{ctl_port}"}
    procs = []
    try:
        procs.append(_start(["scheduler", "--listen", f"127.0.0.1:{sched_port}",
                             "--db", str(tmp_path / "jobs.db"), "--slot", "0.2"],
                            {**env, "SLUICE_SCHEDULER_TOKEN": SCHEDULER_TOKEN},
                            tmp_path / "scheduler.log", urls["scheduler"]))
        procs.append(_start(["controller", "--api", f"127.0.0.1:{ctl_port}",
                             "--ofp-port", str(ofp_port),
                             "--state-file", str(tmp_path / "controller.json")],
                            {**env, "SLUICE_ADMIN_TOKEN": CONTROLLER_TOKEN},
                            tmp_path / "controller.log", urls["controller"]))
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def run_schemathesis(url: str, token: str, workdir: Path, config: Path | None, *options: str
                     ) -> subprocess.CompletedProcess:
    settings = ["--config-file", str(config)] if config else []
    cmd = [str(ST), *settings, "run", f"{url}/openapi.json", *options,
           "--checks", "all", "--seed", SEED, "--workers", "1",
           "--generation-database", "none", "--no-color",
           "-H", f"Authorization: Bearer {token}"]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=900)


def summary(output: str) -> dict:
    """Operations and cases of the run as schemathesis prints them."""
    ops = re.search(r"Operations:\s+(\d+) selected / (\d+) total", output)
    cases = re.search(r"(\d+) generated, (.*)", output)
    return {"operations": int(ops.group(1)) if ops else None,
            "cases": int(cases.group(1)) if cases else None,
            "outcome": cases.group(2).strip() if cases else output[-2000:]}


# the one operation per service whose refusals depend on the service's state (see the
# .toml files): the full run widens what a schema-valid request may get for it
STATEFUL_RULES = {"scheduler": "submit_submissions_post", "controller": "register_jobs_post"}


@pytest.mark.parametrize("service,token,operations", [
    ("scheduler", SCHEDULER_TOKEN, 6), ("controller", CONTROLLER_TOKEN, 13)])
def test_every_operation_holds_to_its_spec(services, tmp_path, service, token, operations):
    config = ROOT / "tests" / f"api_schemathesis_{service}.toml"
    # 1. every operation, every phase (the stateful one follows the documents' links)
    full = run_schemathesis(services[service], token, tmp_path, config,
                            "--phases", "examples,coverage,fuzzing,stateful",
                            "--max-examples", str(MAX_EXAMPLES))
    found = summary(full.stdout)
    print(f"schemathesis {service} (all operations, all phases): {found}")
    assert full.returncode == 0, full.stdout[-6000:] + full.stderr[-2000:]
    assert found["operations"] == operations
    assert found["cases"] >= MAX_EXAMPLES * operations
    assert "failure" not in found["outcome"] and "error" not in found["outcome"]
    # 2. the other operations with schemathesis' own expectations (400 = failure)
    strict = run_schemathesis(services[service], token, tmp_path, None,
                              "--exclude-operation-id", STATEFUL_RULES[service],
                              "--phases", "examples,coverage,fuzzing",
                              "--max-examples", str(MAX_EXAMPLES // 2))
    found = summary(strict.stdout)
    print(f"schemathesis {service} (defaults, all but {STATEFUL_RULES[service]}): {found}")
    assert strict.returncode == 0, strict.stdout[-6000:] + strict.stderr[-2000:]
    assert found["operations"] == operations - 1
    assert "failure" not in found["outcome"] and "error" not in found["outcome"]
