"""The project's bounds on ``sluice demo`` runs, judged from their ``comparison.json``
files: each bound's verdict (met, NOT met or cannot judge) with the figures it was judged
on. Pure; the command line is ``end_to_end/demo_bounds_cli.py``.

The bounds are judged on three runs of one seed (the same workload drawn three times):

- arm d's average JCT at least 30 % below arm a's, in each run;
- arm d no worse than arm c (within 3 %: d's average <= 1.03 x c's), in each run;
- arm b at least 15 % below arm a in average JCT, the median of the runs' changes;
- every arm's predicted average JCT (the mean of its jobs' predictions) within 5 % of its
  measured average, in every run;
- every job's predicted JCT within 15 % of its measured JCT, in every arm of every run;
- wall time under 5 minutes, each run;
and, before any of them, every job of every arm finished (a run with a failed job is
judged on what finished, and this line says NOT met).

The checker fails closed: a figure that is missing or not a finite number (NaN, inf,
text) makes its bound ``cannot judge``, naming the run, the arm and the job; runs of
more than one seed, or another number of runs than three, make every bound ``cannot
judge``. A bound that cannot be judged counts as not met.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

RUNS = 3
ARMS = "abcd"


@dataclass(frozen=True)
class Verdict:
    bound: str
    met: bool
    figures: str
    judged: bool = True       # False: a figure it needs is missing ("cannot judge")

    def line(self) -> str:
        word = "cannot judge" if not self.judged else "met" if self.met else "NOT met"
        return f"{word}: {self.bound} -- {self.figures}"


def _cannot(bound: str, why: str) -> Verdict:
    return Verdict(bound, False, why, judged=False)


def _finite(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def change_pct(base: float, other: float) -> float:
    return 100.0 * (other - base) / base


def _avg(cmp: dict, arm: str) -> float:
    return cmp["arms"][arm]["avg_jct_s"]


def _missing(cmps: list[dict], arms: str) -> list[str]:
    out = []
    for k, c in enumerate(cmps):
        for a in arms:
            if a not in c.get("arms", {}):
                out.append(f"run {k + 1} has no arm {a}")
            elif not _finite(c["arms"][a].get("avg_jct_s")) or c["arms"][a]["avg_jct_s"] <= 0:
                out.append(f"run {k + 1} arm {a}: avg_jct_s is {c['arms'][a].get('avg_jct_s')!r}")
    return out


def runs_check(cmps: list[dict]) -> Verdict:
    """Whether the runs are what the bounds name: three runs of one seed."""
    bound = f"{RUNS} runs of one seed"
    seeds = [c.get("seed") for c in cmps]
    problems = []
    if len(cmps) != RUNS:
        problems.append(f"{len(cmps)} run(s) given, the bounds name {RUNS}")
    if any(s is None for s in seeds):
        problems.append("runs " + ", ".join(str(k + 1) for k, s in enumerate(seeds) if s is None)
                        + " record no seed")
    known = sorted({s for s in seeds if s is not None}, key=str)
    if len(known) > 1:
        problems.append("the runs are of seeds " + ", ".join(
            f"{s} (run {', '.join(str(k + 1) for k, x in enumerate(seeds) if x == s)})"
            for s in known))
    if problems:
        return _cannot(bound, "; ".join(problems))
    return Verdict(bound, True, f"seed {known[0]}, {len(cmps)} runs")


def verdicts(cmps: list[dict]) -> list[Verdict]:
    if not cmps:
        raise ValueError("no comparison.json given")
    runs = runs_check(cmps)
    missing = _missing(cmps, ARMS)
    if missing:
        found = [_cannot("all four arms in every run", "; ".join(missing))]
    else:
        found = _bounds(cmps)
    if not runs.judged:     # the bounds are about three runs of one workload
        found = [_cannot(v.bound, f"not {RUNS} runs of one seed (first line); figures: "
                          f"{v.figures}") for v in found]
    return [runs] + found


def _bounds(cmps: list[dict]) -> list[Verdict]:
    out = []
    unfinished = [f"run {k + 1} arm {a}: {v.get('finished')}/{v.get('jobs_total')}"
                  for k, c in enumerate(cmps) for a, v in c["arms"].items()
                  if v.get("finished") != v.get("jobs_total") or v.get("jobs_total") is None]
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
    out.append(_arm_prediction_verdict(cmps))
    out.append(_prediction_verdict(cmps))
    bound = "wall time under 5 minutes, each run"
    walls = [c.get("wall_time_s") for c in cmps]
    bad = [f"run {k + 1} wall_time_s is {w!r}" for k, w in enumerate(walls) if not _finite(w)]
    out.append(_cannot(bound, "; ".join(bad)) if bad else
               Verdict(bound, all(w < 300.0 for w in walls), _runs(walls, " s")))
    return out


ARM_PREDICTION_PCT = 5.0
JOB_PREDICTION_PCT = 15.0


def _arm_prediction_verdict(cmps: list[dict]) -> Verdict:
    bound = (f"every arm's predicted average JCT within {ARM_PREDICTION_PCT:g} % of the "
             "measured one, every run")
    errors, problems = [], []
    for k, c in enumerate(cmps):
        for a, arm in sorted(c["arms"].items()):
            jobs = arm.get("jobs") if isinstance(arm.get("jobs"), dict) else {}
            pairs = [(j.get("jct_s"), j.get("predicted_jct_s")) for j in jobs.values()]
            if not pairs or not all(_finite(m) and m > 0 and _finite(p) for m, p in pairs):
                problems.append(f"run {k + 1} arm {a}")
                continue
            measured = statistics.mean(m for m, _ in pairs)
            predicted = statistics.mean(p for _, p in pairs)
            errors.append((change_pct(measured, predicted), f"run {k + 1} arm {a}"))
    if problems:
        return _cannot(bound, "no finite JCT or prediction for every job of " + _shown(problems))
    worst = max(errors, key=lambda e: abs(e[0]))
    return Verdict(bound, all(abs(e) <= ARM_PREDICTION_PCT for e, _ in errors),
                   f"worst {worst[0]:+.1f} % ({worst[1]}); over: " + (", ".join(
                       f"{where} {e:+.1f} %" for e, where in errors
                       if abs(e) > ARM_PREDICTION_PCT) or "none"))


def _prediction_verdict(cmps: list[dict]) -> Verdict:
    bound = f"every job's prediction within {JOB_PREDICTION_PCT:g} %, every arm, every run"
    worst, problems = [], []
    for k, c in enumerate(cmps):
        err, where, missing = _worst_error(c)
        worst.append((err, where))
        problems += [f"run {k + 1} {m}" for m in missing]
    if problems:
        return _cannot(bound, "no finite JCT or prediction for " + _shown(problems))
    return Verdict(bound, all(e <= JOB_PREDICTION_PCT for e, _ in worst),
                   "; ".join(f"run {k + 1} worst {e:.1f} % ({where})"
                             for k, (e, where) in enumerate(worst)))


def _shown(items: list[str], most: int = 6) -> str:
    more = len(items) - most
    return ", ".join(items[:most]) + (f" and {more} more" if more > 0 else "")


def _worst_error(cmp: dict) -> tuple[float, str, list[str]]:
    """The worst |predicted/measured - 1| (%) over every job of every arm, where it is,
    and the jobs without a finite JCT or prediction (then the worst is unknown)."""
    worst, where, missing = 0.0, "-", []
    for a, arm in cmp["arms"].items():
        jobs = arm.get("jobs")
        if not isinstance(jobs, dict) or not jobs:
            missing.append(f"arm {a} (no jobs)")
            continue
        for name, j in jobs.items():
            jct, predicted = j.get("jct_s"), j.get("predicted_jct_s")
            if not _finite(jct) or jct <= 0 or not _finite(predicted):
                missing.append(f"arm {a} {name} (jct_s {jct!r}, predicted_jct_s {predicted!r})")
                continue
            err = 100.0 * abs(predicted - jct) / jct
            if err > worst:
                worst, where = err, f"arm {a} {name}"
    return worst, where, missing


def _runs(values: list[float], unit: str) -> str:
    return ", ".join(f"run {k + 1} {v:+.1f}{unit}" if unit == "%" else f"run {k + 1} {v:.1f}{unit}"
                     for k, v in enumerate(values))
