"""The checker of issue 47's bounds on three demo runs: each bound's verdict from the
comparison.json figures."""

import json

from end_to_end.demo_bounds import verdicts
from end_to_end.demo_bounds_cli import main


def run(a: float, b: float, c: float, d: float, wall: float = 250.0, err: float = 0.1,
        finished: int = 2) -> dict:
    def arm(avg):
        jobs = {"x": {"jct_s": avg, "predicted_jct_s": avg * (1 + err), "racks": ["r1"]},
                "y": {"jct_s": avg if finished == 2 else None, "predicted_jct_s": avg,
                      "racks": ["r1"]}}
        return {"avg_jct_s": avg, "p95_jct_s": avg, "makespan_s": avg, "finished": finished,
                "jobs_total": 2, "jobs": jobs}
    return {"seed": 47, "wall_time_s": wall,
            "arms": {"a": arm(a), "b": arm(b), "c": arm(c), "d": arm(d)}}


def test_every_bound_met():
    v = verdicts([run(100, 80, 65, 64), run(100, 84, 60, 61), run(100, 90, 70, 69)])
    assert all(x.met for x in v), [x.line() for x in v]
    assert len(v) == 6


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
    v = lines["every job's prediction within 20 %, every arm, every run"]
    assert not v.met and "run 3 worst 21.0 %" in v.figures
    lines = {v.bound: v for v in verdicts(good[:2] + [run(100, 80, 65, 64, wall=300.0)])}
    assert not lines["wall time under 5 minutes, each run"].met
    lines = {v.bound: v for v in verdicts(good[:2] + [run(100, 80, 65, 64, finished=1)])}
    assert not lines["every job of every arm finished"].met
    assert not lines["every job's prediction within 20 %, every arm, every run"].met


def test_a_missing_arm_is_not_met():
    partial = run(100, 80, 65, 64)
    del partial["arms"]["b"]
    (v,) = verdicts([partial])
    assert not v.met and "run 1 has no arm b" in v.figures


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
    assert main([str(tmp_path / "nothing.json")]) == 2
