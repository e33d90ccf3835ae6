"""mininet_tests.check_bounds: the heavy-tail verdict, from per-seed figures, fail-closed."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from mininet_tests import check_bounds as cb
from sluice_common.rank_rules import DEFAULT_RULE as RULE
from support.paths import REPO

STORED = REPO / "bench" / "results" / "priority-rules"
FAIR = f"{RULE}+off-fair"


def _mode(mean, p95=None, buckets=None, bottleneck=10.0, cpu=0.03, predicted=None):
    return {"mean_jct_s": mean, "p95_jct_s": p95 if p95 is not None else 3 * mean,
            "slowdown_by_bucket": buckets or {"small": mean, "large": mean / 2},
            "bottleneck": {"mean": bottleneck}, "cpu_wait_share": cpu,
            "predicted_mean_jct_s": predicted if predicted is not None else mean * 1.05}


def _run(rule_on_fair=(6.0, 6.0, 6.0), fair=(8.0, 8.0, 8.0)):
    """Three seeds; the rule on the fair queue beats every baseline by 20 % or more."""
    seeds = []
    for i, (r, f) in enumerate(zip(rule_on_fair, fair)):
        seeds.append({"seed": i + 1, "modes": {
            "off": _mode(10.0), "off-shallow": _mode(11.0), "off-fair": _mode(f),
            "pias": _mode(9.5), RULE: _mode(7.0), f"{RULE}+off-shallow": _mode(9.0),
            FAIR: _mode(r)}})
    return seeds


def _judge(run, queue="off-fair", registered=None):
    registered = [s["seed"] for s in run] if registered is None else registered
    return cb.verdicts(run, queue=queue, registered_seeds=registered)


def _by_name(found):
    return {v.name: v for v in found}


def _write(tmp_path, run, **summary):
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    (d / "per_seed.json").write_text(json.dumps(run))
    (d / "summary.json").write_text(json.dumps({"seeds": [s["seed"] for s in run], **summary}))
    return d


def test_every_bound_met_names_the_rule_on_its_queue_and_the_hardest_baseline():
    what, found = _judge(_run())
    assert (what["rule"], what["queue"], what["best_baseline"]) == (FAIR, "off-fair", "off-fair")
    assert what["against"] == pytest.approx({"off": -40.0, "off-shallow": 100 * (6 / 11 - 1),
                                             "off-fair": -25.0, "pias": 100 * (6 / 9.5 - 1)})
    v = _by_name(found)
    assert v["mean JCT vs off"].value == pytest.approx(-40.0)
    assert v["mean JCT vs off-fair"].value == pytest.approx(-25.0)
    assert all(x.met and x.judged for x in found)
    text, ok = cb.report(_run(), "off-fair", [1, 2, 3])
    assert ok and text.endswith("verdict: every bound met")
    assert "off-fair -25.0 %, pias -36.8 %" in text      # the figure against every baseline


def test_pias_can_be_the_hardest_baseline_and_the_rule_stays_on_its_queue():
    seeds = _run()
    for s in seeds:
        s["modes"]["pias"] = _mode(7.5)
    what, found = _judge(seeds)
    assert what["best_baseline"] == "pias" and what["rule"] == FAIR
    assert _by_name(found)["mean JCT vs pias"].value == pytest.approx(-20.0)


def test_the_queue_is_the_configurations_never_the_best_on_the_data(tmp_path, capsys):
    """The rule does better on the fair queue (6.0 s) than on the deep FIFO (7.0 s): a run
    that registered the deep FIFO is judged there (-30 % vs off, -12.5 % vs off-fair: NOT
    met), one that registered the fair queue on it; --queue overrides either."""
    deep = _judge(_run(), queue="off")
    assert deep[0]["rule"] == RULE
    assert _by_name(deep[1])["mean JCT vs off-fair"].value == pytest.approx(-12.5)
    d = _write(tmp_path, _run(), rule_queue="off")
    assert cb.main([str(d)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"the rule on queue off: {RULE} (the run's configuration")
    assert "mean JCT vs off-fair: -12.5 % (bound <= -20 %): NOT met" in out
    _write(tmp_path, _run(), rule_queue="off-fair")
    assert cb.main([str(d)]) == 0
    assert cb.main([str(d), "--queue", "off"]) == 1
    assert f"the rule on queue off: {RULE} (--queue)" in capsys.readouterr().out
    assert cb.main([str(d), "--queue", FAIR]) == 0
    # a summary that names no queue: the default queue, and the header says so
    _write(tmp_path, _run())
    assert cb.main([str(d)]) == 1
    assert "(the default queue: the run registered none)" in capsys.readouterr().out
    assert cb.main([str(d), "--queue", "pias"]) == 2
    assert "queue 'pias' is not one of" in capsys.readouterr().err


def test_the_hardest_baseline_is_chosen_seed_by_seed_not_by_median_of_medians():
    """The rule's time 1, 10, 100 s over three seeds; against off-fair its ratio is 0.9,
    0.5, 0.6 (median -40 %), against pias 0.55 in every seed (-45 %). pias has the lower
    median mean JCT (18.2 s against off-fair's 20 s), but off-fair is the harder one."""
    run = []
    for k, r in enumerate((1.0, 10.0, 100.0)):
        run.append({"seed": k + 1, "modes": {
            "off": _mode(3 * r), "off-shallow": _mode(3 * r),
            "off-fair": _mode(r / (0.9, 0.5, 0.6)[k]), "pias": _mode(r / 0.55),
            RULE: _mode(2 * r), f"{RULE}+off-shallow": _mode(2 * r), FAIR: _mode(r)}})
    median_of = {b: statistics.median(s["modes"][b]["mean_jct_s"] for s in run)
                 for b in ("off-fair", "pias")}
    assert min(median_of, key=median_of.get) == "pias"           # what a level median picks
    what, found = _judge(run)
    assert what["best_baseline"] == "off-fair"
    assert what["against"]["off-fair"] == pytest.approx(-40.0)
    assert what["against"]["pias"] == pytest.approx(-45.0)
    assert _by_name(found)["mean JCT vs off-fair"].value == pytest.approx(-40.0)


def test_paired_median_not_the_ratio_of_medians():
    """Seeds 1-3: per-seed changes -50, -10, -10 % (median -10 %) although the ratio of the
    medians would be 6/8 - 1 = -25 %: the paired figure is judged, and misses -20 %."""
    run = _run(rule_on_fair=(4.0, 7.2, 6.3), fair=(8.0, 8.0, 7.0))
    v = _by_name(_judge(run)[1])["mean JCT vs off-fair"]
    assert v.value == pytest.approx(-10.0) and not v.met and v.judged


@pytest.mark.parametrize("change, name", [
    (lambda m: m[FAIR].update(p95_jct_s=40.0), "p95 JCT vs off-fair"),
    (lambda m: m[FAIR]["slowdown_by_bucket"].update(large=5.0),
     "worst size bucket's slowdown vs off-fair"),
    (lambda m: m[FAIR].update(bottleneck={"mean": 9.0}), "bottleneck throughput, of off-fair's"),
    (lambda m: m["off-shallow"].update(cpu_wait_share=0.12), "CPU wait, of mean JCT, every mode"),
    (lambda m: m["off"].update(predicted_mean_jct_s=12.0),
     "prediction error |predicted/measured - 1|, every mode"),
])
def test_each_bound_fails_on_its_own(change, name):
    run = _run()
    for seed in run:
        change(seed["modes"])
    found = _by_name(_judge(run)[1])
    assert [n for n, v in found.items() if not v.met] == [name]
    assert found[name].judged


@pytest.mark.parametrize("bad", [math.nan, math.inf, "6.0", None, True])
def test_a_non_number_in_one_seeds_mean_jct_is_not_judged(bad):
    run = _run()
    run[1]["modes"][FAIR]["mean_jct_s"] = bad
    what, found = _judge(run)
    v = _by_name(found)
    for name in ("mean JCT vs off", "mean JCT vs the hardest baseline",
                 "prediction error |predicted/measured - 1|, every mode"):
        assert not v[name].judged and not v[name].met, name
        assert "seed 2" in v[name].detail and f"{FAIR} mean_jct_s" in v[name].detail
        assert "cannot judge" in v[name].line()
    assert what["best_baseline"] is None            # which baseline is hardest is unknown
    text, ok = cb.report(run, "off-fair", [1, 2, 3])
    assert not ok and "cannot judge" in text.splitlines()[-1]


def test_nan_as_the_rules_mean_in_most_seeds_is_never_every_bound_met():
    run = _run()
    for seed in run[:2]:
        seed["modes"][FAIR]["mean_jct_s"] = math.nan
    text, ok = cb.report(run, "off-fair", [1, 2, 3])
    assert not ok and "every bound met" not in text
    assert "mean JCT vs off: cannot judge" in text


def test_nan_in_a_baselines_mean_is_named_not_a_wrong_figure():
    run = _run()
    run[2]["modes"]["off-fair"]["mean_jct_s"] = math.nan
    what, found = _judge(run, queue="off")
    assert what["against"]["off-fair"] is None and what["best_baseline"] is None
    v = _by_name(found)["mean JCT vs the hardest baseline"]
    assert not v.judged and "seed 3" in v.detail and "off-fair mean_jct_s is nan" in v.detail


def test_nan_prediction_in_one_seed_is_not_judged():
    run = _run()
    run[0]["modes"]["pias"]["predicted_mean_jct_s"] = math.nan
    v = _by_name(_judge(run)[1])["prediction error |predicted/measured - 1|, every mode"]
    assert not v.judged and not v.met and "seed 1" in v.detail and "pias" in v.detail


def test_a_mode_removed_from_one_seed_is_not_judged():
    run = _run()
    del run[1]["modes"]["off-shallow"]
    found = _by_name(_judge(run)[1])
    for name in ("every baseline run in every seed", "mean JCT vs the hardest baseline",
                 "CPU wait, of mean JCT, every mode"):
        assert not found[name].judged and not found[name].met, name
        assert "off-shallow missing from seed 2" in found[name].detail, name
    # the rule's own mode missing from one seed: its figures are not the other seeds'
    run = _run()
    del run[2]["modes"][FAIR]
    v = _by_name(_judge(run)[1])["mean JCT vs off"]
    assert not v.judged and f"{FAIR} missing from seed 3" in v.detail


def test_a_mode_only_in_a_later_seed_counts_for_every_mode():
    run = _run()
    run[2]["modes"]["attained"] = _mode(8.0, cpu=0.5)
    v = _by_name(_judge(run)[1])["CPU wait, of mean JCT, every mode"]
    assert not v.judged and "attained missing from seed 1" in v.detail


def test_fewer_seeds_than_registered_judges_nothing(tmp_path, capsys):
    run = _run()
    found = _judge(run, registered=[1, 2, 3, 4, 5])[1]
    seeds = _by_name(found)["every registered seed in the figures"]
    assert not seeds.judged and "seeds 4, 5 registered, not in the figures" in seeds.detail
    assert not any(v.met or v.judged for v in found)
    assert not _by_name(cb.verdicts(run, queue="off-fair")[1])[
        "every registered seed in the figures"].judged          # unknown: not judged either
    d = _write(tmp_path, run, registered_seeds=[1, 2, 3, 4, 5], rule_queue="off-fair")
    assert cb.main([str(d)]) == 1
    out = capsys.readouterr().out
    assert "every registered seed in the figures: cannot judge" in out
    assert "verdict: 9 of 9 bounds NOT met or not judged (0 NOT met, 9 cannot judge)" in out


def test_a_bucket_in_fewer_than_three_seeds_is_not_judged():
    run = _run() + [{"seed": 4, "modes": {m: _mode(r["mean_jct_s"]) for m, r in
                                            _run()[0]["modes"].items()}}]
    run[3]["modes"][FAIR] = _mode(6.0)
    for seed in run[:2]:                # medium in seeds 1 and 2 only
        for m in seed["modes"].values():
            m["slowdown_by_bucket"]["medium"] = 1.0
    v = _by_name(_judge(run)[1])["worst size bucket's slowdown vs off-fair"]
    assert not v.judged and "bucket medium in 2 seed(s) only (seeds 1, 2" in v.detail
    for m in run[2]["modes"].values():  # in three of the four: judged over those three
        m["slowdown_by_bucket"]["medium"] = 1.0
    run[0]["modes"][FAIR]["slowdown_by_bucket"]["medium"] = 1.5
    run[1]["modes"][FAIR]["slowdown_by_bucket"]["medium"] = 1.2
    v = _by_name(_judge(run)[1])["worst size bucket's slowdown vs off-fair"]
    assert v.judged and v.value == pytest.approx(20.0) and not v.met
    assert "medium +20.0 % (3 seeds)" in v.detail


def test_a_run_without_off_is_refused():
    run = _run()
    for seed in run:
        del seed["modes"]["off"]
    with pytest.raises(ValueError, match="needs 'off'"):
        _judge(run)


def test_command_line_exit_status(tmp_path, capsys):
    good = _write(tmp_path, _run(), rule_queue="off-fair")
    assert cb.main([str(good)]) == 0
    stored = tmp_path / "heavy-tail-x-per-seed.json"
    stored.write_text(json.dumps(_run(rule_on_fair=(7.9, 7.9, 7.9))))
    (tmp_path / "heavy-tail-x-summary.json").write_text(json.dumps(
        {"seeds": [1, 2, 3], "rule_queue": "off-fair"}))
    assert cb.main([str(tmp_path / "heavy-tail-x-summary.json")]) == 1
    assert "NOT met" in capsys.readouterr().out
    assert cb.main([str(stored)]) == 1                       # the summary found beside it
    assert "registered [1, 2, 3]" in capsys.readouterr().out
    (tmp_path / "junk.json").write_text('{"not": "a list"}')
    assert cb.main([str(tmp_path / "junk.json")]) == 2
    assert "not a list of per-seed records" in capsys.readouterr().err


def _stored_copy(tmp_path) -> tuple[Path, list]:
    d = tmp_path / "stored"
    d.mkdir()
    shutil.copy(STORED / "verdict-0.7-bbr-s11-summary.json", d / "summary.json")
    return d, json.loads((STORED / "verdict-0.7-bbr-s11-per-seed.json").read_text())


def _check(d: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mininet_tests.check_bounds", str(d)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_a_stored_run_with_nan_in_one_seeds_mean_jct_is_not_judged(tmp_path):
    d, per_seed = _stored_copy(tmp_path)
    (d / "per_seed.json").write_text(json.dumps(per_seed))
    before = _check(d)
    assert "mean JCT vs off: -30.5 % (bound <= -30 %): met" in before.stdout, before.stderr
    per_seed[2]["modes"]["remaining"]["mean_jct_s"] = math.nan      # seed 13
    (d / "per_seed.json").write_text(json.dumps(per_seed))
    after = _check(d)
    assert after.returncode == 1, after.stderr
    assert "mean JCT vs off: cannot judge" in after.stdout
    assert "seed 13: remaining mean_jct_s is nan" in after.stdout


def test_a_stored_run_with_a_mode_removed_from_one_seed_is_not_judged(tmp_path):
    d, per_seed = _stored_copy(tmp_path)
    del per_seed[1]["modes"]["off-shallow"]                         # seed 12
    (d / "per_seed.json").write_text(json.dumps(per_seed))
    out = _check(d)
    assert out.returncode == 1, out.stderr
    assert ("every baseline run in every seed: cannot judge (off, off-shallow, off-fair, "
            "pias) [off-shallow missing from seed 12]") in out.stdout
    assert "CPU wait, of mean JCT, every mode: cannot judge" in out.stdout


def test_a_run_is_judged_on_the_default_rule_it_was_made_with():
    assert cb.rule_of({"default_rule": "remaining"}) == "remaining"
    assert cb.rule_of({"default_rule": "no-such-rule"}) == RULE
    assert cb.rule_of(None) == RULE
    # the stored verdicts were made with remaining as the default rule
    summary = json.loads((STORED / "verdict-0.7-bbr-s11-summary.json").read_text())
    assert cb.rule_of(summary) == "remaining"
