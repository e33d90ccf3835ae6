"""The checker of the project's bounds on three demo runs: each bound's verdict from the
comparison.json figures, fail-closed."""

import json
import math

import pytest

from end_to_end.demo_bounds import verdicts
from end_to_end.demo_bounds_cli import main


def run(a: float, b: float, c: float, d: float, wall: float = 250.0, err: float = 0.08,
        finished: int = 2) -> dict:
    def arm(avg):
        jobs = {"x": {"jct_s": avg, "predicted_jct_s": avg * (1 + err), "racks": ["r1"]},
                "y": {"jct_s": avg if finished == 2 else None, "predicted_jct_s": avg,
                      "racks": ["r1"]}}
        return {"avg_jct_s": avg, "p95_jct_s": avg, "makespan_s": avg, "finished": finished,
                "jobs_total": 2, "jobs": jobs}
    return {"seed": 47, "wall_time_s": wall,
            "arms": {"a": arm(a), "b": arm(b), "c": arm(c), "d": arm(d)}}


JOBS_PREDICTION = "every job's prediction within 15 %, every arm, every run"
ARM_PREDICTION = "every arm's predicted average JCT within 5 % of the measured one, every run"


def test_every_bound_met():
    v = verdicts([run(100, 80, 65, 64), run(100, 84, 60, 61), run(100, 90, 70, 69)])
    assert all(x.met for x in v), [x.line() for x in v]
    assert len(v) == 8 and v[0].figures == "seed 47, 3 runs"


def test_each_bound_can_fail_on_its_own():
    good = [run(100, 80, 65, 64)] * 3
    lines = {v.bound: v for v in verdicts([run(100, 80, 65, 71)] + good[1:])}
    assert not lines["d at least 30 % below a in average JCT, each run"].met   # one run -29 %
    lines = {v.bound: v for v in verdicts([run(100, 80, 60, 62)] + good[1:])}
    assert not lines["d no worse than c (within 3 %), each run"].met            # +3.3 %
    # b: -20, -10, -10 -> median -10
    lines = {v.bound: v for v in verdicts([run(100, 80, 65, 64), run(100, 90, 65, 64),
                                           run(100, 90, 65, 64)])}
    v = lines["b at least 15 % below a in average JCT, median of the runs"]
    assert not v.met and "median -10.0 %" in v.figures
    lines = {v.bound: v for v in verdicts(good[:2] + [run(100, 80, 65, 64, err=0.21)])}
    v = lines["every job's prediction within 15 %, every arm, every run"]
    assert not v.met and "run 3 worst 21.0 %" in v.figures
    # job x 12 % over, y exact: every job within 15 %, the arm's average 6 % over
    lines = {v.bound: v for v in verdicts(good[:2] + [run(100, 80, 65, 64, err=0.12)])}
    assert lines[JOBS_PREDICTION].met
    v = lines[ARM_PREDICTION]
    assert not v.met and v.figures.startswith("worst +6.0 % (run 3 arm ")
    assert "run 3 arm d +6.0 %" in v.figures
    lines = {v.bound: v for v in verdicts(good[:2] + [run(100, 80, 65, 64, wall=300.0)])}
    assert not lines["wall time under 5 minutes, each run"].met
    lines = {v.bound: v for v in verdicts(good[:2] + [run(100, 80, 65, 64, finished=1)])}
    assert not lines["every job of every arm finished"].met
    assert not lines["every job's prediction within 15 %, every arm, every run"].met


def test_a_missing_arm_is_not_met():
    partial = run(100, 80, 65, 64)
    del partial["arms"]["b"]
    runs, v = verdicts([partial, run(100, 80, 65, 64), run(100, 80, 65, 64)])
    assert runs.met and not v.met and not v.judged and "run 1 has no arm b" in v.figures
    nan = run(100, 80, 65, 64)
    nan["arms"]["c"]["avg_jct_s"] = math.nan
    runs, v = verdicts([nan, run(100, 80, 65, 64), run(100, 80, 65, 64)])
    assert not v.judged and "run 1 arm c: avg_jct_s is nan" in v.figures


PREDICTION = JOBS_PREDICTION


@pytest.mark.parametrize("bad", [math.nan, None, math.inf, "1.0"])
def test_a_missing_or_nan_prediction_cannot_be_judged(bad):
    every = [run(100, 80, 65, 64) for _ in range(3)]
    for r in every:
        for arm in r["arms"].values():
            for job in arm["jobs"].values():
                job["predicted_jct_s"] = bad
    found = {x.bound: x for x in verdicts(every)}
    arm = found[ARM_PREDICTION]
    assert not arm.met and not arm.judged and "run 1 arm a" in arm.figures
    v = found[PREDICTION]
    assert not v.met and not v.judged and "worst 0.0 %" not in v.figures
    assert "run 1 arm a x" in v.figures and v.line().startswith("cannot judge: ")
    one = [run(100, 80, 65, 64) for _ in range(3)]
    one[2]["arms"]["d"]["jobs"]["y"]["predicted_jct_s"] = bad
    v = {x.bound: x for x in verdicts(one)}[PREDICTION]
    assert not v.judged and v.figures.endswith("run 3 arm d y (jct_s 64, predicted_jct_s "
                                               f"{bad!r})")


def test_runs_of_mixed_seeds_or_not_three_judge_nothing():
    other = run(100, 80, 65, 64)
    other["seed"] = 48
    found = verdicts([run(100, 80, 65, 64), other, run(100, 80, 65, 64)])
    assert not found[0].judged and "the runs are of seeds 47 (run 1, 3), 48 (run 2)" in \
        found[0].figures
    assert not any(v.met or v.judged for v in found)
    found = verdicts([run(100, 80, 65, 64), run(100, 80, 65, 64)])
    assert not found[0].judged and "2 run(s) given, the bounds name 3" in found[0].figures
    assert not any(v.met for v in found)
    assert found[2].figures.startswith("not 3 runs of one seed (first line); figures: run 1")


def test_the_command_prints_each_verdict(tmp_path, capsys):
    paths = []
    for k, r in enumerate([run(100, 80, 65, 64), run(100, 80, 65, 64), run(100, 80, 65, 80)]):
        d = tmp_path / f"r{k}"
        d.mkdir()
        (d / "comparison.json").write_text(json.dumps(r))
        paths.append(str(d))
    assert main(paths) == 1
    out = capsys.readouterr().out
    assert "NOT met: d at least 30 % below a" in out and "met: wall time" in out
    assert main(paths[:2]) == 1
    assert "cannot judge: 3 runs of one seed -- 2 run(s) given" in capsys.readouterr().out
    for p in paths:
        (tmp_path / p / "comparison.json").write_text(json.dumps(run(100, 80, 65, 64)))
    assert main(paths) == 0
    assert main([str(tmp_path / "nothing.json")]) == 2
    (tmp_path / "list.json").write_text("[]")
    assert main([str(tmp_path / "list.json")]) == 2
    assert "not a demo comparison" in capsys.readouterr().err
