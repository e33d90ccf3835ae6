"""The demo's predictions made again on a stored run: each arm's error against what the
run measured, beside the one it recorded."""

from __future__ import annotations

import json

import pytest

from bench.end_to_end import bench_predictions as bp
from end_to_end import run
from end_to_end.arms import ARMS
from end_to_end.demo_arms import predictions, workload
from end_to_end.workload_draw import DrawSpec, jobs_yaml
from topologies import load_topology

TOPO = load_topology(run.DEMO_TOPOLOGY)
CONFIG = run.RunConfig(jobs=str(run.DEMO_JOBS), topology=run.DEMO_TOPOLOGY, compute="emulated")


def stored_run(tmp_path, scale_measured: float):
    """A run directory whose arms a and c measured every job at ``scale_measured`` x the
    dry run's prediction and recorded the prediction itself."""
    jobs = workload(TOPO, CONFIG, 1000, DrawSpec(jobs=6)).jobs
    _, predicted = predictions(TOPO, jobs, CONFIG, [ARMS["a"], ARMS["c"]])
    arms = {k: {"jobs": {n: {"jct_s": p * scale_measured, "predicted_jct_s": p}
                         for n, p in jct.items()}} for k, jct in predicted.items()}
    d = tmp_path / "run"
    d.mkdir()
    (d / "workload.yaml").write_text(jobs_yaml(jobs, 1000))
    (d / "comparison.json").write_text(json.dumps({"seed": 1000, "arms": arms}))
    return d


def test_each_measured_arm_is_predicted_again_and_set_against_the_run(tmp_path, capsys):
    d = stored_run(tmp_path, scale_measured=1.25)
    rows = bp.run_rows(d, TOPO, CONFIG, [ARMS[k] for k in "abcd"])
    assert [r["arm"] for r in rows] == ["a", "c"]           # only the arms the run has
    for r in rows:           # every job measured 25 % longer: predicted 20 % short
        assert r["arm_pct"] == pytest.approx(-20.0, abs=0.1)
        assert r["recorded_arm_pct"] == pytest.approx(-20.0, abs=0.1)
        assert r["worst_job_pct"] == pytest.approx(-20.0, abs=0.1)
    assert bp.main([str(d)]) == 0
    out = capsys.readouterr().out
    assert "FIGURE arms within the arm bound: 0 of 2" in out


def test_a_directory_that_is_not_a_stored_run_exits_2(tmp_path, capsys):
    assert bp.main([str(tmp_path)]) == 2
    assert "not a stored demo run" in capsys.readouterr().err
