"""The simulator's trust check's verdicts: a measured figure beside the simulator's, the
error between them and whether it is within its bound. Pure; the figures come from
``end_to_end.demo_trust`` (the demo's arms) and ``mininet_tests.heavy_tail_trust`` (the
heavy-tail verdict runs' modes), the command line is ``mininet_tests.simulator_trust``.

It fails closed: a comparison with a reason it cannot be made, or a figure that is
missing, not a finite number or (measured) not above zero, is ``cannot judge``, and a
comparison that cannot be judged counts as not met. No comparison at all is not met
either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MET, NOT_MET, CANNOT = "met", "NOT met", "cannot judge"


def finite(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


@dataclass(frozen=True)
class Comparison:
    """One measured figure (seconds) beside the simulator's, within ``bound_pct``."""
    run: str                      # the run it was measured in
    case: str                     # the arm or the mode
    measured: float | None
    simulated: float | None
    bound_pct: float
    reason: str | None = None     # why the simulator cannot be compared here (None: it can)

    def why_not(self) -> str | None:
        """Why it cannot be judged (None: it can)."""
        if self.reason:
            return self.reason
        if not finite(self.measured):
            return f"the measured figure is {self.measured!r}, not a finite number"
        if self.measured <= 0:
            return f"the measured figure is {self.measured!r}, not above 0"
        if not finite(self.simulated):
            return f"the simulated figure is {self.simulated!r}, not a finite number"
        return None

    def error_pct(self) -> float | None:
        """(simulated - measured) / measured, in percent; None when it cannot be judged."""
        if self.why_not() is not None:
            return None
        return 100.0 * (self.simulated - self.measured) / self.measured

    def verdict(self) -> str:
        err = self.error_pct()
        if err is None:
            return CANNOT
        return MET if abs(err) <= self.bound_pct else NOT_MET

    @property
    def met(self) -> bool:
        return self.verdict() == MET


def _seconds(value) -> str:
    return f"{value:.2f}" if finite(value) else "-"


def table(rows: list[Comparison], case_header: str) -> list[str]:
    """A markdown table: run, case, measured, simulated, error %, verdict (with the
    reason where it cannot be judged)."""
    lines = [f"| run | {case_header} | measured s | simulated s | error % | verdict |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        err = r.error_pct()
        word = r.verdict()
        if word == CANNOT:
            word = f"{CANNOT}: {r.why_not()}"
        else:
            word += f" (bound {r.bound_pct:g} %)"
        lines.append(f"| {r.run} | {r.case} | {_seconds(r.measured)} | "
                     f"{_seconds(r.simulated)} | "
                     f"{'-' if err is None else f'{err:+.1f}'} | {word} |")
    return lines


def tally(rows: list[Comparison]) -> str:
    counts = {w: sum(r.verdict() == w for r in rows) for w in (MET, NOT_MET, CANNOT)}
    return (f"{counts[MET]} of {len(rows)} comparison(s) within bound, {counts[NOT_MET]} not, "
            f"{counts[CANNOT]} cannot judge")


def all_met(rows: list[Comparison]) -> bool:
    """Every comparison within its bound, and at least one comparison."""
    return bool(rows) and all(r.met for r in rows)


def exit_code(rows: list[Comparison]) -> int:
    """0 when every comparison is within its bound; 1 otherwise (a cannot-judge too)."""
    return 0 if all_met(rows) else 1


def summary(rows: list[Comparison]) -> dict:
    """What ``sluice whatif`` states beside its figures: how many comparisons, how many
    within the bound, and the range of the errors that could be judged (percent)."""
    errors = [e for e in (r.error_pct() for r in rows) if e is not None]
    return {"comparisons": len(rows), "within_bound": sum(r.met for r in rows),
            "cannot_judge": sum(r.verdict() == CANNOT for r in rows),
            "bound_pct": max((r.bound_pct for r in rows), default=None),
            "error_min_pct": round(min(errors), 1) if errors else None,
            "error_max_pct": round(max(errors), 1) if errors else None}
