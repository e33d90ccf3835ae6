"""The simulator's trust check's verdicts: pure, from a measured and a simulated figure."""

from __future__ import annotations

import math

import pytest

from end_to_end import trust_verdict as tv


def _row(measured, simulated, reason=None, bound=10.0):
    return tv.Comparison("seed49-run1", "a", measured, simulated, bound, reason)


def test_an_error_within_the_bound_is_met_and_one_beyond_it_is_not():
    assert _row(20.0, 21.9).verdict() == tv.MET
    assert _row(20.0, 21.9).error_pct() == pytest.approx(9.5)
    assert _row(20.0, 17.9).verdict() == tv.NOT_MET
    assert _row(20.0, 17.9).error_pct() == pytest.approx(-10.5)
    assert _row(20.0, 22.0).verdict() == tv.MET           # on the bound: within it


@pytest.mark.parametrize("measured, simulated", [
    (math.nan, 20.0), (20.0, math.nan), (None, 20.0), (20.0, None), (math.inf, 20.0),
    (0.0, 1.0), (-3.0, 1.0), (True, 1.0), ("20", 20.0)])
def test_a_figure_that_is_missing_or_not_a_finite_positive_number_cannot_be_judged(
        measured, simulated):
    row = _row(measured, simulated)
    assert row.verdict() == tv.CANNOT
    assert row.error_pct() is None
    assert not row.met
    assert tv.exit_code([row]) == 1


def test_a_reason_makes_it_cannot_judge_whatever_the_figures_and_the_table_says_why():
    row = _row(20.0, 20.0, reason="arm c is not in the run")
    assert row.verdict() == tv.CANNOT
    line = tv.table([row], "arm")[-1]
    assert "cannot judge: arm c is not in the run" in line
    assert "| 20.00 | 20.00 | - |" in line


def test_the_table_has_a_row_per_comparison_with_its_figures():
    lines = tv.table([_row(27.006, 26.64), _row(10.2, 9.0)], "arm")
    assert lines[0].startswith("| run | arm | measured s | simulated s | error % |")
    assert lines[2] == "| seed49-run1 | a | 27.01 | 26.64 | -1.4 | met (bound 10 %) |"
    assert lines[3].endswith("| -11.8 | NOT met (bound 10 %) |")


def test_exit_zero_only_when_every_comparison_is_within_its_bound():
    met, missed, unjudged = _row(20.0, 21.0), _row(20.0, 30.0), _row(math.nan, 20.0)
    assert tv.exit_code([met, met]) == 0
    assert tv.exit_code([met, missed]) == 1
    assert tv.exit_code([met, unjudged]) == 1
    assert tv.exit_code([]) == 1                       # nothing compared: not met
    assert tv.tally([met, missed, unjudged]) == (
        "1 of 3 comparison(s) within bound, 1 not, 1 cannot judge")
