"""mininet_tests.check_bounds: the heavy-tail verdict, from per-seed figures, fail-closed."""

from __future__ import annotations

import copy
import json

import pytest

from mininet_tests import check_bounds as cb


def _mode(mean, p95=None, buckets=None, bottleneck=10.0, cpu=0.03, predicted=None):
    return {"mean_jct_s": mean, "p95_jct_s": p95 if p95 is not None else 3 * mean,
            "slowdown_by_bucket": buckets or {"small": mean, "large": mean / 2},
            "bottleneck": {"mean": bottleneck}, "cpu_wait_share": cpu,
            "predicted_mean_jct_s": predicted if predicted is not None else mean * 1.05}


def _run(rule_on_fair=(6.0, 6.0, 6.0), fair=(8.0, 8.0, 8.0)):
    """Three seeds; the rule on the fair queue is the best variant by default."""
    seeds = []
    for i, (r, f) in enumerate(zip(rule_on_fair, fair)):
        seeds.append({"seed": i + 1, "modes": {
            "off": _mode(10.0), "off-shallow": _mode(11.0), "off-fair": _mode(f),
            "pias": _mode(9.5), "remaining": _mode(7.0), "remaining+off-shallow": _mode(9.0),
            "remaining+off-fair": _mode(r)}})
    return seeds


def _by_name(found):
    return {v.name: v for v in found}


def test_pias_can_be_the_best_baseline_and_the_rule_stays_on_a_queue():
    seeds = _run()
    for s in seeds:
        s["modes"]["pias"] = _mode(7.5)
    what, found = cb.verdicts(seeds)
    assert what["best_baseline"] == "pias" and what["rule"] == "remaining+off-fair"
    assert _by_name(found)["mean JCT vs pias"].value == pytest.approx(-20.0)
    for s in seeds:
        del s["modes"]["pias"]
    v = _by_name(cb.verdicts(seeds)[1])["every baseline run in every seed"]
    assert not v.met and "pias" in v.detail


def test_every_bound_met_names_the_rule_on_its_best_queue_and_the_best_baseline():
    what, found = cb.verdicts(_run())
    assert what == {"rule": "remaining+off-fair", "best_baseline": "off-fair", "seeds": [1, 2, 3]}
    v = _by_name(found)
    assert v["mean JCT vs off"].value == pytest.approx(-40.0)
    assert v["mean JCT vs off-fair"].value == pytest.approx(-25.0)
    assert all(x.met for x in found)
    text, ok = cb.report(_run())
    assert ok and text.endswith("verdict: every bound met")


def test_the_rule_on_the_deep_fifo_counts_when_it_is_its_best_queue():
    run = _run(rule_on_fair=(7.5, 7.5, 7.5))
    assert cb.verdicts(run)[0]["rule"] == "remaining"


def test_paired_median_not_the_ratio_of_medians():
    """Seeds 1-3: per-seed changes -50, -10, -10 % (median -10 %) although the ratio of the
    medians would be 6/8 - 1 = -25 %: the paired figure is judged, and misses -20 %."""
    run = _run(rule_on_fair=(4.0, 7.2, 6.3), fair=(8.0, 8.0, 7.0))
    v = _by_name(cb.verdicts(run)[1])["mean JCT vs off-fair"]
    assert v.value == pytest.approx(-10.0) and not v.met


@pytest.mark.parametrize("change, name", [
    (lambda m: m["remaining+off-fair"].update(p95_jct_s=40.0), "p95 JCT vs off-fair"),
    (lambda m: m["remaining+off-fair"]["slowdown_by_bucket"].update(large=5.0),
     "worst size bucket's slowdown vs off-fair"),
    (lambda m: m["remaining+off-fair"].update(bottleneck={"mean": 9.0}),
     "bottleneck throughput, of off-fair's"),
    (lambda m: m["attained"].update(cpu_wait_share=0.12) if "attained" in m else
     m["off-shallow"].update(cpu_wait_share=0.12), "CPU wait, of mean JCT, every mode"),
    (lambda m: m["off"].update(predicted_mean_jct_s=12.0),
     "prediction error |predicted/measured - 1|, every mode"),
])
def test_each_bound_fails_on_its_own(change, name):
    run = _run()
    for seed in run:
        change(seed["modes"])
    found = _by_name(cb.verdicts(run)[1])
    assert [n for n, v in found.items() if not v.met] == [name]


def test_a_missing_figure_is_not_met():
    run = _run()
    for seed in run:
        del seed["modes"]["off-shallow"]["predicted_mean_jct_s"]
    v = _by_name(cb.verdicts(run)[1])["prediction error |predicted/measured - 1|, every mode"]
    assert v.value is None and not v.met and "off-shallow" in v.detail


def test_a_run_without_every_baseline_has_no_passing_verdict():
    run = _run()
    for seed in run:
        del seed["modes"]["off-shallow"], seed["modes"]["remaining+off-shallow"]
    text, ok = cb.report(run)
    assert not ok and "missing off-shallow" in text


def test_a_run_without_off_is_refused():
    run = _run()
    for seed in run:
        del seed["modes"]["off"]
    with pytest.raises(ValueError, match="needs 'off'"):
        cb.verdicts(run)


def test_command_line_exit_status(tmp_path, capsys):
    good = tmp_path / "good"
    good.mkdir()
    (good / "per_seed.json").write_text(json.dumps(_run()))
    assert cb.main([str(good)]) == 0
    bad = copy.deepcopy(_run(rule_on_fair=(7.9, 7.9, 7.9)))
    stored = tmp_path / "heavy-tail-x-per-seed.json"
    stored.write_text(json.dumps(bad))
    (tmp_path / "heavy-tail-x-summary.json").write_text("{}")
    assert cb.main([str(tmp_path / "heavy-tail-x-summary.json")]) == 1
    assert "NOT met" in capsys.readouterr().out
    (tmp_path / "junk.json").write_text('{"not": "a list"}')
    assert cb.main([str(tmp_path / "junk.json")]) == 2
    assert "not a list of per-seed records" in capsys.readouterr().err
