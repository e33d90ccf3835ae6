"""bench.fabric.rejudge_verdicts: the stored verdicts judged again, a row per verdict."""

from __future__ import annotations

import re
import subprocess
import sys

from bench.fabric import rejudge_verdicts as rj
from support.paths import REPO


def _rows(text: str) -> list[str]:
    """The tables' data rows (not their header or rule lines)."""
    lines = text.splitlines()
    return [line for k, line in enumerate(lines) if line.startswith("| ")
            and k + 1 < len(lines) and not lines[k + 1].startswith("|---")
            and not line.startswith("| seed |") and not line.startswith("| seeds |")]


def test_it_prints_one_row_per_stored_verdict_with_the_stored_verdict_beside_it():
    done = subprocess.run([sys.executable, "-m", "bench.fabric.rejudge_verdicts"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    assert len(rows) == len(rj.REGISTERED) + len(rj.DEMO_REGISTERED) == 9
    assert done.stdout.count("### Heavy-tail verdicts at ") == 3
    results = REPO / "bench" / "results"
    for reg in rj.REGISTERED:
        stored = (results / "priority-rules" / f"verdict-{reg.name}-check.txt").read_text()
        last = stored.strip().splitlines()[-1][len("verdict:"):].strip()
        first = f"{reg.seeds[0]}-{reg.seeds[-1]}"
        (row,) = [r for r in rows[:6] if r.startswith(f"| {first} |") and last in r
                  and reg.config in _table_of(done.stdout, r)]
        assert "none registered" in row                   # the stored runs registered no queue
    for reg, row in zip(rj.DEMO_REGISTERED, rows[6:]):
        assert row.startswith(f"| {reg.seed} | 3 |")
        stored = (results / "demo" / f"seed{reg.seed}-check.txt").read_text()
        met = len(re.findall(r"^met: ", stored, re.M))
        assert row.rstrip(" |").endswith(f"{met} of {met + stored.count('NOT met:')} met")


def _table_of(text: str, row: str) -> str:
    """The heading of the table ``row`` is in."""
    before = text[:text.index(row)]
    return before[before.rindex("### "):].splitlines()[0]


def test_a_stored_check_line_is_read_by_what_it_compares():
    bounds, head = rj.parse_old_check(
        "the rule on its best queue: remaining+off-fair; best baseline: pias; seeds [1]\n"
        "mean JCT vs off: -26.6 % (bound <= -30 %): NOT met\n"
        "mean JCT vs pias: -26.5 % (bound <= -20 %): met\n"
        "prediction error |predicted/measured - 1|, every mode: 11.4 % (bound <= 15 %): met "
        "[worst off]\nverdict: 1 of 8 bounds NOT met\n")
    assert bounds == {"mean JCT vs off": "-26.6 % NOT met",
                      "mean JCT vs hardest baseline": "-26.5 % met",
                      "prediction error": "11.4 % met"}
    assert head == {"rule": "remaining+off-fair", "best": "pias",
                    "verdict": "1 of 8 bounds NOT met"}
