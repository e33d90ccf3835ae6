"""Every example that runs on the fabric (`sluice run`) finishes what its `# try:` line
says in under 5 minutes (slow; the others: tests/unit/project/test_examples.py)."""

from __future__ import annotations

import pytest

from bench.end_to_end.bench_examples import LIMIT_S, examples, run_example

CASES = [pytest.param(ex, id=ex.path.name, marks=[pytest.mark.slow, pytest.mark.fabric])
         for ex in examples() if ex.needs_fabric]


@pytest.mark.parametrize("example", CASES)
def test_example_finishes_in_under_five_minutes(example, tmp_path):
    rc, wall, tail = run_example(example, tmp_path)
    assert rc == 0, tail
    assert wall < LIMIT_S, f"{example.path.name} took {wall:.0f} s"
