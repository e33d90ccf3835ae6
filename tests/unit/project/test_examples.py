"""Every example finishes what its `# try:` line says in under 5 minutes (slow;
bench/end_to_end/bench_examples.py records times). The `sluice run` examples take minutes
and the fabric: tests/fabric/end_to_end/test_examples.py."""

from __future__ import annotations

import pytest

from bench.end_to_end.bench_examples import LIMIT_S, examples, run_example

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
