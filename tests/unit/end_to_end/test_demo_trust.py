"""The simulator beside a demo run: reading the run, its workload, each arm's row."""

from __future__ import annotations

import json
import shutil

from end_to_end import demo_trust as dt
from end_to_end.trust_verdict import CANNOT
from support.paths import REPO

STORED = REPO / "bench" / "results" / "demo"
RUN = STORED / "seed49-run1-comparison.json"


def test_a_stored_comparison_uses_the_stored_workload_of_its_seed():
    run = dt.load_run(RUN)
    assert run.reason is None, run.reason
    assert run.label == "seed49-run1"
    assert run.workload.endswith("seed49-workload.yaml")
    assert [j.name for j in run.jobs][:2] == ["p01-resnet18-2g", "p02-alexnet-8g"]


def test_jobs_on_one_uplink_share_it_among_the_jobs_sending_at_once():
    """Seed 61's FIFO arm runs vgg16 and alexnet on 8 GPUs across the racks at once: each
    sends one way at a time (push, then pull), so on the full-duplex uplinks they meet only
    part of the time, as the exchange model shares a link; an equal split of their flows
    made the arm 27 % longer than measured."""
    run = dt.load_run(STORED / "seed61-run1-comparison.json")
    assert run.reason is None, run.reason
    rows = {r.case: r for r in dt.compare_run(run)}
    for arm in "ab":
        assert abs(rows[arm].simulated / rows[arm].measured - 1) < 0.05, rows[arm]
    # whatif's equal split of the flows is what the dry run's sharing corrects
    per_flow = {r.case: r for r in dt.compare_run(run, share="flows")}
    assert per_flow["a"].simulated > 1.2 * rows["a"].simulated, (per_flow["a"], rows["a"])


def test_a_run_directory_uses_its_workload_file_and_gives_the_same_figures(tmp_path):
    out = tmp_path / "trust-demo"
    out.mkdir()
    shutil.copy(RUN, out / "comparison.json")
    shutil.copy(STORED / "seed49-workload.yaml", out / "workload.yaml")
    run, stored = dt.load_run(out), dt.load_run(RUN)
    assert run.label == "trust-demo" and run.workload == str(out / "workload.yaml")
    rows, stored_rows = dt.compare_run(run), dt.compare_run(stored)
    assert [r.case for r in rows] == list("abcd")
    assert [r.simulated for r in rows] == [r.simulated for r in stored_rows]
    assert all(r.simulated > 0 for r in rows)


def test_without_a_workload_file_it_is_drawn_again_from_the_seed(tmp_path):
    shutil.copy(STORED / "seed51-run1-comparison.json", tmp_path / "run.json")
    run = dt.load_run(tmp_path / "run.json")
    assert run.reason is None, run.reason
    assert run.workload.startswith("drawn again from seed 51")
    assert len(run.jobs) == 10


def test_a_workload_whose_jobs_are_not_the_measured_ones_makes_every_arm_cannot_judge(tmp_path):
    cmp = json.loads(RUN.read_text())
    cmp["seed"] = 50                                     # another draw, other job names
    (tmp_path / "run.json").write_text(json.dumps(cmp))
    rows = dt.compare_run(dt.load_run(tmp_path / "run.json"))
    assert [r.verdict() for r in rows] == [CANNOT] * 4
    assert "are not the ones the arms measured" in rows[0].why_not()


def test_an_unreadable_run_makes_its_four_arms_cannot_judge(tmp_path):
    (tmp_path / "comparison.json").write_text("{not json")
    rows = dt.compare_run(dt.load_run(tmp_path))
    assert [(r.case, r.verdict()) for r in rows] == [(k, CANNOT) for k in "abcd"]
    assert "cannot be read" in rows[0].why_not()
    (tmp_path / "comparison.json").write_text(json.dumps({"seed": 49}))
    assert "no 'arms' object" in dt.compare_run(dt.load_run(tmp_path))[3].why_not()


def test_a_missing_arm_or_an_arm_with_an_unfinished_job_cannot_be_judged(tmp_path):
    cmp = json.loads(RUN.read_text())
    del cmp["arms"]["c"]
    cmp["arms"]["b"]["finished"] = 9
    cmp["arms"]["d"]["avg_jct_s"] = float("nan")
    out = tmp_path / "run"
    out.mkdir()
    (out / "comparison.json").write_text(json.dumps(cmp))
    shutil.copy(STORED / "seed49-workload.yaml", out / "workload.yaml")
    rows = {r.case: r for r in dt.compare_run(dt.load_run(out))}
    assert rows["a"].verdict() != CANNOT
    assert rows["b"].verdict() == CANNOT and "9 of 10 jobs finished" in rows["b"].why_not()
    assert rows["c"].verdict() == CANNOT and "arm c is not in the run" in rows["c"].why_not()
    assert rows["d"].verdict() == CANNOT and "not a finite number" in rows["d"].why_not()


def test_an_arm_the_run_ran_otherwise_than_the_arm_now_is_cannot_judge(tmp_path):
    cmp = json.loads(RUN.read_text())
    cmp["arms"]["a"]["policy"] = "las"
    (tmp_path / "seed49-run1-comparison.json").write_text(json.dumps(cmp))
    shutil.copy(STORED / "seed49-workload.yaml", tmp_path / "seed49-workload.yaml")
    row = dt.compare_run(dt.load_run(tmp_path / "seed49-run1-comparison.json"))[0]
    assert row.verdict() == CANNOT and "policy 'las'" in row.why_not()
