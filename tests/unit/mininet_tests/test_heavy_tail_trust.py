"""The simulator beside the heavy-tail verdict runs: what it can and cannot model."""

from __future__ import annotations

import json
import math

from end_to_end.trust_verdict import CANNOT
from mininet_tests import heavy_tail_trust as ht
from support.paths import REPO

STORED = REPO / "bench" / "results" / "priority-rules"


def test_every_mode_lacks_the_mix_s_jobs_and_the_fair_queue_and_pias_lack_more():
    assert ht.mode_gaps("remaining") == [ht.JOB_SHAPE]
    assert ht.mode_gaps("off-shallow") == [ht.JOB_SHAPE]
    assert any("fair queueing" in g for g in ht.mode_gaps("remaining+off-fair"))
    assert any("PIAS" in g for g in ht.mode_gaps("pias"))
    assert "'nonsense'" in ht.mode_gaps("nonsense")[-1]
    assert ht.gap_reason(ht.mode_gaps("off")).startswith("the simulator has no model of ")


def test_a_stored_verdict_run_gives_every_mode_as_cannot_judge_with_its_measured_figure():
    rows = ht.compare_run(STORED / "verdict-0.7-bbr-s11-summary.json")
    assert [r.case for r in rows] == ["off", "off-shallow", "off-fair", "pias", "progress",
                                      "remaining", "attained", "remaining+off-shallow",
                                      "remaining+off-fair"]
    assert {r.run for r in rows} == {"verdict-0.7-bbr-s11"}
    assert all(r.verdict() == CANNOT for r in rows)
    summary = json.loads((STORED / "verdict-0.7-bbr-s11-summary.json").read_text())
    assert rows[0].measured == summary["modes"]["off"]["mean_jct_s"]


def test_a_seed_without_a_mode_s_figure_is_named(tmp_path):
    per_seed = json.loads((STORED / "verdict-0.7-bbr-s11-per-seed.json").read_text())
    per_seed[1]["modes"]["remaining"]["mean_jct_s"] = math.nan
    del per_seed[2]["modes"]["pias"]
    (tmp_path / "per_seed.json").write_text(json.dumps(per_seed))
    rows = {r.case: r for r in ht.compare_run(tmp_path)}
    assert rows["remaining"].measured is None
    assert "seed(s) 12 have no finite mean JCT for remaining" in rows["remaining"].why_not()
    assert "seed(s) 13" in rows["pias"].why_not()


def test_a_run_that_cannot_be_read_is_one_cannot_judge_row(tmp_path):
    (tmp_path / "per_seed.json").write_text("[]")
    rows = ht.compare_run(tmp_path)
    assert len(rows) == 1 and rows[0].verdict() == CANNOT
    assert "cannot be read" in rows[0].why_not()
