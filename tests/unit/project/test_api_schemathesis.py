"""Both REST services against their own OpenAPI documents, with schemathesis.

The real services are started as processes (`sluice scheduler`, `sluice controller` with
no switch connected) with admin tokens on free loopback ports; schemathesis runs every
operation of each document through all its phases (examples, coverage, fuzzing and the
stateful phase that follows the documents' links) with every check, and must find
nothing. Two budgets: `quick` (``make test-fast``: 10 examples per operation,
45 s a service) and `full` (marked slow, ``make test``: 50 examples per operation and
``MAX_TIME`` seconds a service, the budget of schemathesis' own run that found the
controller's ``ge``/``le`` defect at ~17,000 cases; see bench/RESULTS.md for the case
counts and times). The run is seeded, so CI sees the same cases every time;
``SLUICE_SCHEMATHESIS_SEED`` picks another, ``SLUICE_SCHEMATHESIS_EXAMPLES`` and
``SLUICE_SCHEMATHESIS_MAX_TIME`` another full budget.
tests/data/api_schemathesis_{scheduler,controller}.toml hold the one documented exception
of each.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from support.live_services import live_services

from support.paths import REPO as ROOT
ST = Path(sys.executable).with_name("st")
# budget -> (examples per operation, seconds per service for the full run)
BUDGETS = {"quick": (10, 45),
           "full": (int(os.environ.get("SLUICE_SCHEMATHESIS_EXAMPLES", "50")),
                    int(os.environ.get("SLUICE_SCHEMATHESIS_MAX_TIME", "240")))}
SEED = os.environ.get("SLUICE_SCHEMATHESIS_SEED", "30")
SCHEDULER_TOKEN = "schemathesis-scheduler-token"
CONTROLLER_TOKEN = "schemathesis-controller-token"


@pytest.fixture
def services(tmp_path):
    with live_services(tmp_path, SCHEDULER_TOKEN, CONTROLLER_TOKEN) as urls:
        yield urls


def run_schemathesis(url: str, token: str, workdir: Path, config: Path | None, *options: str
                     ) -> subprocess.CompletedProcess:
    settings = ["--config-file", str(config)] if config else []
    cmd = [str(ST), *settings, "run", f"{url}/openapi.json", *options,
           "--checks", "all", "--seed", SEED, "--workers", "1",
           "--generation-database", "none", "--no-color",
           "-H", f"Authorization: Bearer {token}"]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=900)


def cases_per_operation(ndjson: Path) -> Counter:
    """Test cases per operation ("METHOD /path"), every phase, from schemathesis' NDJSON
    event stream: a case of the examples, coverage or fuzzing phase counts for its
    operation (its wrong-method probes included), a step of the stateful phase for the
    operation it called."""
    counts: Counter = Counter()
    for line in ndjson.read_text().splitlines():
        event = json.loads(line).get("ScenarioFinished")
        if not event:
            continue
        recorder = event["recorder"]
        for case in recorder.get("cases", {}).values():
            value = case["value"]
            counts[f"{value['method']} {value['path']}" if event["phase"] == "stateful"
                   else recorder["label"]] += 1
    return counts


def operations_with_inputs(url: str) -> set[str]:
    """The document's operations that take a parameter or a body: the others (GET
    /health, /metrics, ...) have one possible request, which no generator can vary."""
    with urllib.request.urlopen(url + "/openapi.json", timeout=10) as resp:
        doc = json.load(resp)
    return {f"{method.upper()} {path}" for path, item in doc["paths"].items()
            for method, op in item.items()
            if op.get("parameters") or op.get("requestBody")}


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


@pytest.mark.parametrize("budget", ["quick", pytest.param("full", marks=pytest.mark.slow)])
@pytest.mark.parametrize("service,token,operations", [
    ("scheduler", SCHEDULER_TOKEN, 6), ("controller", CONTROLLER_TOKEN, 13)])
def test_every_operation_holds_to_its_spec(services, tmp_path, service, token, operations,
                                           budget):
    max_examples, max_time = BUDGETS[budget]
    config = ROOT / "tests" / "data" / f"api_schemathesis_{service}.toml"
    # 1. every operation, every phase (the stateful one follows the documents' links)
    events = tmp_path / f"{service}.ndjson"
    t0 = time.monotonic()
    full = run_schemathesis(services[service], token, tmp_path, config,
                            "--phases", "examples,coverage,fuzzing,stateful",
                            "--max-examples", str(max_examples),
                            "--max-time", str(max_time),
                            "--report", "ndjson", "--report-ndjson-path", str(events))
    found = summary(full.stdout)
    print(f"schemathesis {service} ({budget}: all operations, all phases): {found}, "
          f"{time.monotonic() - t0:.0f} s")
    assert full.returncode == 0, full.stdout[-6000:] + full.stderr[-2000:]
    assert found["operations"] == operations
    assert "failure" not in found["outcome"] and "error" not in found["outcome"]
    per_op = cases_per_operation(events)
    with_inputs = operations_with_inputs(services[service])
    for op in sorted(per_op, key=lambda o: (o not in with_inputs, o)):
        print(f"  {op:<34} {per_op[op]:>5} cases{'' if op in with_inputs else ' (no inputs)'}")
    assert len(per_op) == operations and sum(per_op.values()) == found["cases"]
    # every operation that takes a parameter or a body: at least max_examples cases; one
    # without inputs (GET /health, ...) has one possible request, which it gets, with
    # the coverage phase's probes of the other methods of its path
    assert with_inputs <= set(per_op), (with_inputs, per_op)
    # (the quick budget's 45 s may end the fuzzing phase early on a loaded machine: there
    # every such operation must have been tried, the full budget's must have its share)
    floor = max_examples if budget == "full" else 1
    assert all(per_op[op] >= floor for op in with_inputs), per_op
    # 2. the other operations with schemathesis' own expectations (400 = failure)
    strict = run_schemathesis(services[service], token, tmp_path, None,
                              "--exclude-operation-id", STATEFUL_RULES[service],
                              "--phases", "examples,coverage,fuzzing",
                              "--max-examples", str(max_examples // 2),
                              "--max-time", str(max(10, max_time // 8)))
    found = summary(strict.stdout)
    print(f"schemathesis {service} (defaults, all but {STATEFUL_RULES[service]}): {found}")
    assert strict.returncode == 0, strict.stdout[-6000:] + strict.stderr[-2000:]
    assert found["operations"] == operations - 1
    assert "failure" not in found["outcome"] and "error" not in found["outcome"]
