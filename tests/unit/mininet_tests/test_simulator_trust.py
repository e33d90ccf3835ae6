"""``python -m mininet_tests.simulator_trust``: its table, its exit status."""

from __future__ import annotations

import re
import subprocess
import sys

from mininet_tests import simulator_trust
from support.paths import REPO

DEMO = REPO / "bench" / "results" / "demo" / "seed49-run1-comparison.json"
HEAVY_TAIL = REPO / "bench" / "results" / "priority-rules" / "verdict-0.7-bbr-summary.json"


def test_a_stored_demo_run_prints_a_row_per_arm():
    done = subprocess.run([sys.executable, "-m", "mininet_tests.simulator_trust",
                           "--demo", str(DEMO)], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode in (0, 1), done.stderr
    rows = re.findall(r"^\| seed49-run1 \| ([abcd]) \| [\d.]+ \| [\d.]+ \| [+-][\d.]+ \| "
                      r"(?:met|NOT met) \(bound 10 %\) \|$", done.stdout, re.M)
    assert rows == list("abcd") * 2, done.stdout       # the dry run's split, then whatif's
    assert "as the demo's dry run" in done.stdout and "as sluice whatif" in done.stdout
    assert "of 8 comparison(s) within bound" in done.stdout


def test_a_heavy_tail_run_prints_a_row_per_mode_pias_included(capsys):
    code = simulator_trust.main(["--heavy-tail", str(HEAVY_TAIL)])
    out = capsys.readouterr().out
    found = re.search(r"^(\d) of 9 comparison\(s\) within bound, (\d) not, 0 cannot judge$",
                      out, re.M)
    assert found, out
    assert code == (0 if found.group(1) == "9" else 1)      # exit 0 only when all hold
    for mode in ("off-fair", "pias"):
        assert re.search(rf"^\| verdict-0.7-bbr \| {mode} \| [\d.]+ \| [\d.]+ \| "
                         r"[+-][\d.]+ \| ", out, re.M), out


def test_no_run_or_a_path_that_does_not_exist_is_bad_input(tmp_path, capsys):
    assert simulator_trust.main([]) == 2
    assert "no run given" in capsys.readouterr().err
    assert simulator_trust.main(["--demo", str(tmp_path / "absent")]) == 2
    assert "argument --demo" in capsys.readouterr().err
