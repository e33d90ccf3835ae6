"""Both REST services against their own OpenAPI documents, with schemathesis.

The real services are started as processes (`sluice scheduler`, `sluice controller` with
no switch connected) with admin tokens on free loopback ports; schemathesis runs every
operation of each document through all its phases (examples, coverage, fuzzing and the
stateful phase that follows the documents' links) with every check, and must find
nothing. Two budgets of the same run: `quick` (``make test-fast``: 10 examples per
operation, one seed) and `full` (marked slow, ``make test``: 50 examples per operation,
two seeds; `make test` leaves `quick` out, the `full` run covers all it does). Each run is
a number of examples, not a time: schemathesis' ``--max-time`` repeats fuzzing and
stateful testing until the time is spent, so the cases, and how many, would depend on
the machine's load. The seeds are fixed, so CI sees the same cases every time;
``SLUICE_SCHEMATHESIS_SEED`` picks another first seed, ``SLUICE_SCHEMATHESIS_EXAMPLES``
another full budget, and ``SLUICE_SCHEMATHESIS_MAX_TIME`` (seconds per seed) makes each
full run repeat until that time is spent, the way schemathesis' own run that found the
controller's ``ge``/``le`` defect at ~17,000 cases did (see bench/RESULTS.md for the case
counts and times).
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
# budget -> (examples per operation, runs: one per seed, seeds SEED, SEED + 1, ...).
# Two seeds for `full`: one run of the controller's document gives DELETE /jobs/{job_id}
# 31 cases at 50 examples and at 100 alike (its fuzzing phase ends after 9 there), short
# of the budget's 50; a second seed's run adds as many again.
BUDGETS = {"quick": (10, 1),
           "full": (int(os.environ.get("SLUICE_SCHEMATHESIS_EXAMPLES", "50")), 2)}
SEED = int(os.environ.get("SLUICE_SCHEMATHESIS_SEED", "30"))
# opt-in: seconds each full run repeats its fuzzing and stateful phases for
MAX_TIME = os.environ.get("SLUICE_SCHEMATHESIS_MAX_TIME")
SCHEDULER_TOKEN = "schemathesis-scheduler-token"
CONTROLLER_TOKEN = "schemathesis-controller-token"


@pytest.fixture
def services(tmp_path):
    with live_services(tmp_path, SCHEDULER_TOKEN, CONTROLLER_TOKEN) as urls:
        yield urls


def run_schemathesis(url: str, token: str, workdir: Path, config: Path | None, *options: str,
                     seed: int = SEED) -> subprocess.CompletedProcess:
    settings = ["--config-file", str(config)] if config else []
    cmd = [str(ST), *settings, "run", f"{url}/openapi.json", *options,
           "--checks", "all", "--seed", str(seed), "--workers", "1",
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


@pytest.mark.parametrize("budget", [pytest.param("quick", marks=pytest.mark.fast_only),
                                    pytest.param("full", marks=pytest.mark.slow)])
@pytest.mark.parametrize("service,token,operations", [
    ("scheduler", SCHEDULER_TOKEN, 6), ("controller", CONTROLLER_TOKEN, 13)])
def test_every_operation_holds_to_its_spec(services, tmp_path, service, token, operations,
                                           budget):
    max_examples, seeds = BUDGETS[budget]
    repeat = ["--max-time", MAX_TIME] if MAX_TIME and budget == "full" else []
    config = ROOT / "tests" / "data" / f"api_schemathesis_{service}.toml"
    # 1. every operation, every phase (the stateful one follows the documents' links),
    # once per seed
    per_op: Counter = Counter()
    for seed in range(SEED, SEED + seeds):
        events = tmp_path / f"{service}-{seed}.ndjson"
        t0 = time.monotonic()
        full = run_schemathesis(services[service], token, tmp_path, config,
                                "--phases", "examples,coverage,fuzzing,stateful",
                                "--max-examples", str(max_examples), *repeat,
                                "--report", "ndjson", "--report-ndjson-path", str(events),
                                seed=seed)
        found = summary(full.stdout)
        print(f"schemathesis {service} ({budget}, seed {seed}: all operations, all phases): "
              f"{found}, {time.monotonic() - t0:.0f} s")
        assert full.returncode == 0, full.stdout[-6000:] + full.stderr[-2000:]
        assert found["operations"] == operations
        assert "failure" not in found["outcome"] and "error" not in found["outcome"]
        cases = cases_per_operation(events)
        assert len(cases) == operations and sum(cases.values()) == found["cases"]
        per_op += cases
    with_inputs = operations_with_inputs(services[service])
    for op in sorted(per_op, key=lambda o: (o not in with_inputs, o)):
        print(f"  {op:<34} {per_op[op]:>5} cases{'' if op in with_inputs else ' (no inputs)'}")
    # every operation that takes a parameter or a body: at least max_examples cases; one
    # without inputs (GET /health, ...) has one possible request, which it gets, with
    # the coverage phase's probes of the other methods of its path
    assert with_inputs <= set(per_op), (with_inputs, per_op)
    assert all(per_op[op] >= max_examples for op in with_inputs), per_op
    # 2. the other operations with schemathesis' own expectations (400 = failure)
    strict = run_schemathesis(services[service], token, tmp_path, None,
                              "--exclude-operation-id", STATEFUL_RULES[service],
                              "--phases", "examples,coverage,fuzzing",
                              "--max-examples", str(max_examples // 2))
    found = summary(strict.stdout)
    print(f"schemathesis {service} (defaults, all but {STATEFUL_RULES[service]}): {found}")
    assert strict.returncode == 0, strict.stdout[-6000:] + strict.stderr[-2000:]
    assert found["operations"] == operations - 1
    assert "failure" not in found["outcome"] and "error" not in found["outcome"]
