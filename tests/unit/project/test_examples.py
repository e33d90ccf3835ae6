"""Every example finishes what its `# try:` line says in under 5 minutes (slow;
bench/end_to_end/bench_examples.py records times). The `sluice run` examples take minutes
and the fabric: tests/fabric/end_to_end/test_examples.py; here each one's own command
line, with `--dry-run`, decides every job of its file (the run's loop on a virtual clock, no
fabric)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from bench.end_to_end.bench_examples import LIMIT_S, examples, run_example
from support.paths import REPO

CASES = [pytest.param(ex, id=ex.path.name, marks=[pytest.mark.slow])
         for ex in examples() if not ex.needs_fabric]


def test_every_example_states_its_command_and_time():
    found = examples()
    assert {ex.path.name for ex in found} >= {"mixed.yaml", "layers.yaml", "first-run.yaml"}
    assert all(0 < ex.stated_s < LIMIT_S for ex in found)
    assert any(ex.needs_fabric for ex in found)      # at least one runs for real


@pytest.mark.parametrize("example", CASES)
def test_example_finishes_in_under_five_minutes(example, tmp_path):
    rc, wall, tail = run_example(example, tmp_path)
    assert rc == 0, tail
    assert wall < LIMIT_S, f"{example.path.name} took {wall:.0f} s"


# what an example's header says its run shows, as the dry run prints it
DRY_RUN_SHOWS = {"las.yaml": ["suspend big", "start wide"]}
RUN_CASES = [pytest.param(ex, id=ex.path.name) for ex in examples() if ex.command[0] == "run"]


@pytest.mark.parametrize("example", RUN_CASES)
def test_a_run_example_s_own_command_decides_every_job_in_a_dry_run(example):
    done = subprocess.run([sys.executable, "-m", "sluice", *example.command, "--dry-run"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    names = [j["name"] for j in yaml.safe_load(example.path.read_text())["jobs"]]
    started = set(re.findall(r"\bstart (\S+):", done.stdout))
    assert started == set(names), done.stdout
    for line in DRY_RUN_SHOWS.get(example.path.name, []):
        assert line in done.stdout, done.stdout
