"""Every example that runs on the fabric (`sluice run`) finishes what its `# try:` line
says in under 5 minutes (slow; the others: tests/unit/project/test_examples.py), except
one whose run a dedicated fabric test already makes with more checks (``COVERED``): its
own command is checked without the fabric (`--dry-run`, tests/unit/project/test_examples.py)
and bench/end_to_end/bench_examples.py times it."""

from __future__ import annotations

import pytest

from bench.end_to_end.bench_examples import LIMIT_S, examples, run_example
from support.paths import REPO

# example -> the fabric test that runs what it shows, on a smaller fabric
COVERED = {
    # `sluice run --policy las`: a job suspended at a batch boundary, resumed from its
    # checkpoint, every batch run once, the report's preemption table
    "las.yaml": "tests/fabric/end_to_end/test_las_fabric.py",
}
CASES = [pytest.param(ex, id=ex.path.name, marks=[pytest.mark.slow, pytest.mark.fabric])
         for ex in examples() if ex.needs_fabric and ex.path.name not in COVERED]


@pytest.mark.parametrize("example", CASES)
def test_example_finishes_in_under_five_minutes(example, tmp_path):
    rc, wall, tail = run_example(example, tmp_path)
    assert rc == 0, tail
    assert wall < LIMIT_S, f"{example.path.name} took {wall:.0f} s"


def test_every_covered_example_is_a_fabric_example_and_its_test_exists():
    fabric = {ex.path.name: ex for ex in examples() if ex.needs_fabric}
    assert set(COVERED) <= set(fabric), set(COVERED) - set(fabric)
    for name, test in COVERED.items():
        assert (REPO / test).is_file(), (name, test)
        # the covering test runs the example's policy for real
        policy = fabric[name].command[fabric[name].command.index("--policy") + 1]
        assert f'"--policy", "{policy}"' in (REPO / test).read_text(), (name, test)
