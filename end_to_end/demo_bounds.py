"""Issue 47's bounds on three ``sluice demo`` runs, judged from their ``comparison.json``
files: each bound's verdict (met / NOT met) with the figures it was judged on. Pure; the
command line is ``end_to_end/demo_bounds_cli.py``.

The bounds, as the issue gives them:

- arm d's average JCT at least 30 % below arm a's, in each run;
- arm d no worse than arm c (within 3 %: d's average <= 1.03 x c's), in each run;
- arm b at least 15 % below arm a in average JCT, the median of the runs' changes;
- every job's predicted JCT within 20 % of its measured JCT, in every arm of every run;
- wall time under 5 minutes, each run;
and, before any of them, every job of every arm finished (a run with a failed job is
judged on what finished, and this line says NOT met).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    bound: str
    met: bool
    figures: str

    def line(self) -> str:
        return f"{'met' if self.met else 'NOT met'}: {self.bound} -- {self.figures}"


def change_pct(base: float, other: float) -> float:
    return 100.0 * (other - base) / base


def _avg(cmp: dict, arm: str) -> float:
    return cmp["arms"][arm]["avg_jct_s"]


def _missing(cmps: list[dict], arms: str) -> list[str]:
    return [f"run {k + 1} has no arm {a}" for k, c in enumerate(cmps) for a in arms
            if a not in c["arms"] or c["arms"][a].get("avg_jct_s") is None]


def verdicts(cmps: list[dict]) -> list[Verdict]:
    if not cmps:
        raise ValueError("no comparison.json given")
    missing = _missing(cmps, "abcd")
    if missing:
        return [Verdict("all four arms in every run", False, "; ".join(missing))]
    out = []
    unfinished = [f"run {k + 1} arm {a}: {v['finished']}/{v['jobs_total']}"
                  for k, c in enumerate(cmps) for a, v in c["arms"].items()
                  if v["finished"] != v["jobs_total"]]
    out.append(Verdict("every job of every arm finished", not unfinished,
                       "; ".join(unfinished) or "all finished"))
    d_vs_a = [change_pct(_avg(c, "a"), _avg(c, "d")) for c in cmps]
    out.append(Verdict("d at least 30 % below a in average JCT, each run",
                       all(x <= -30.0 for x in d_vs_a), _runs(d_vs_a, "%")))
    d_vs_c = [change_pct(_avg(c, "c"), _avg(c, "d")) for c in cmps]
    out.append(Verdict("d no worse than c (within 3 %), each run",
                       all(x <= 3.0 for x in d_vs_c), _runs(d_vs_c, "%")))
    b_vs_a = [change_pct(_avg(c, "a"), _avg(c, "b")) for c in cmps]
    med = statistics.median(b_vs_a)
    out.append(Verdict("b at least 15 % below a in average JCT, median of the runs",
                       med <= -15.0, f"median {med:+.1f} % ({_runs(b_vs_a, '%')})"))
    worst = [_worst_error(c) for c in cmps]
    out.append(Verdict("every job's prediction within 20 %, every arm, every run",
                       all(w[0] <= 20.0 for w in worst),
                       "; ".join(f"run {k + 1} worst {e:.1f} % ({where})"
                                 for k, (e, where) in enumerate(worst))))
    walls = [c["wall_time_s"] for c in cmps]
    out.append(Verdict("wall time under 5 minutes, each run", all(w < 300.0 for w in walls),
                       _runs(walls, " s")))
    return out


def _worst_error(cmp: dict) -> tuple[float, str]:
    worst, where = 0.0, "-"
    for a, arm in cmp["arms"].items():
        for name, j in arm["jobs"].items():
            if j["jct_s"] and j["predicted_jct_s"] is not None:
                err = 100.0 * abs(j["predicted_jct_s"] - j["jct_s"]) / j["jct_s"]
                if err > worst:
                    worst, where = err, f"arm {a} {name}"
            elif j["jct_s"] is None or j["predicted_jct_s"] is None:
                worst, where = float("inf"), f"arm {a} {name} has no JCT or no prediction"
                return worst, where
    return worst, where


def _runs(values: list[float], unit: str) -> str:
    return ", ".join(f"run {k + 1} {v:+.1f}{unit}" if unit == "%" else f"run {k + 1} {v:.1f}{unit}"
                     for k, v in enumerate(values))
