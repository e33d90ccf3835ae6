"""Re-summarising heavy-tail experiments: seeds of several runs merged into one summary,
the model's predictions recomputed from each seed's mix (no fabric)."""

import json
from pathlib import Path

import pytest

from mininet_tests.heavy_tail.config import HeavyTailConfig
from mininet_tests.heavy_tail.run import resummarize
from support.paths import REPO

RESULTS = REPO / "bench" / "results" / "priority-rules"


def _config(original: dict) -> HeavyTailConfig:
    return HeavyTailConfig(load=0.7, scale=original["scale"], bytes_lo=original["bytes_lo"],
                           baselines="all")


def _split(tmp_path) -> tuple[Path, Path, dict]:
    per_seed = json.loads((RESULTS / "heavy-tail-0.7-baselines-per-seed.json").read_text())
    summary = json.loads((RESULTS / "heavy-tail-0.7-baselines-summary.json").read_text())
    a, b = tmp_path / "a", tmp_path / "b"
    for d, seeds in ((a, per_seed[:1]), (b, per_seed[1:])):
        d.mkdir()
        (d / "per_seed.json").write_text(json.dumps(seeds))
        (d / "summary.json").write_text(json.dumps(summary))
    return a, b, summary


def test_merged_seeds_give_the_summary_of_the_run_that_had_them_all(tmp_path):
    a, b, original = _split(tmp_path)
    config = _config(original)
    merged = resummarize(a, config, [b])
    assert merged["seeds"] == original["seeds"]
    for mode, x in original["modes"].items():
        assert merged["modes"][mode]["mean_jct_s"] == pytest.approx(x["mean_jct_s"])
        assert merged["modes"][mode]["predicted_mean_jct_s"] == pytest.approx(
            x["predicted_mean_jct_s"])
    assert merged["best_baseline"] == original["best_baseline"]
    assert merged.get("predictions") == original.get("predictions")    # carried, not redone
    with pytest.raises(ValueError, match="twice"):
        resummarize(a, config, [b])             # a now holds both seeds already


def test_repredict_recomputes_from_the_mix_and_says_so(tmp_path):
    a, b, original = _split(tmp_path)
    again = resummarize(a, _config(original), [b], repredict=True)
    assert "recomputed after the runs" in again["predictions"]
    for mode, x in again["modes"].items():       # measurements untouched
        assert x["mean_jct_s"] == pytest.approx(original["modes"][mode]["mean_jct_s"])
        assert x["predicted_mean_jct_s"] > 0
    # the rule the model favours is still a gain over priority off
    assert again["modes"]["remaining"]["predicted_mean_jct_s"] < \
        again["modes"]["off"]["predicted_mean_jct_s"]
    # the model's error splits into the start-up and the rest
    seeds = json.loads((a / "per_seed.json").read_text())
    for seed in seeds:
        for m in seed["modes"].values():
            assert 0 < m["predicted_mean_startup_s"] < m["predicted_mean_jct_s"]
            assert "predicted_startup_s" not in m            # the older model's field
    off = again["modes"]["off"]
    assert off["model_error_pct"] == pytest.approx(
        100 * (off["predicted_mean_jct_s"] / off["mean_jct_s"] - 1), abs=15)
    assert off["model_startup_error_s"] is not None and off["model_rest_error_s"] is not None
    assert "Where the model misses" in (a / "experiment.md").read_text()


def test_a_long_experiment_never_runs_out_of_ports():
    """5 seeds x 8 modes of 16 jobs once ran past port 65,535 at the 32nd run; the port
    blocks now cycle, and consecutive runs never share a port."""
    from mininet_tests.heavy_tail.fabric_setup import PORTS_FROM, PORTS_TO, run_ports
    from ps_runtime.plan import BLOCK

    bases = [run_ports(k, 16) for k in range(5 * 8 * 2)]
    assert all(PORTS_FROM <= b and b + 16 * BLOCK <= PORTS_TO for b in bases)
    assert all(abs(a - b) >= 16 * BLOCK for a, b in zip(bases, bases[1:]))
    assert len(set(bases[:20])) == 20            # a block comes back only 20+ runs later
    with pytest.raises(ValueError):
        run_ports(0, 1000)


def test_the_hosts_ephemeral_ports_stay_clear_of_the_port_blocks():
    """A host's outgoing connections take ports from its own ephemeral range: it lies
    above every block a run's ps-lite may listen on, whatever --host-tcp says."""
    from mininet_tests.heavy_tail.fabric_setup import EPHEMERAL_PORTS, PORTS_TO, host_sysctls
    from mininet_tests.heavy_tail.config import HOST_TCP

    for tuning in HOST_TCP:
        got = host_sysctls(tuning)
        low, high = map(int, got["net.ipv4.ip_local_port_range"].split())
        assert (low, high) == EPHEMERAL_PORTS and PORTS_TO < low < high <= 65535
        assert HOST_TCP[tuning].items() <= got.items()


def test_model_by_bucket_reads_a_stored_run_job_by_job():
    """bench.fabric.model_by_bucket: every job of the stored seed counted once in its
    bucket, the measured sums those of the run, the model's per-job JCTs averaging to the
    mean the experiment predicts."""
    import json

    from bench.fabric.model_by_bucket import (by_bucket, by_mode, mode_table, phase_errors,
                                              phase_table, predict, table)
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from mininet_tests.heavy_tail.predict import model_prediction
    from mininet_tests.heavy_tail.run import stored_mix

    stored = REPO / "bench/results/priority-rules"
    per_seed = json.loads((stored / "heavy-tail-0.7-baselines-per-seed.json").read_text())[:1]
    summary = json.loads((stored / "heavy-tail-0.7-baselines-summary.json").read_text())
    out = by_bucket(per_seed, summary, ["off-fair"])
    run = per_seed[0]["modes"]["off-fair"]
    assert {b: a["n"] for b, a in out["off-fair"].items()} == run["bucket_sizes"]
    assert sum(a["measured"] for a in out["off-fair"].values()) == pytest.approx(
        sum(run["jct_s"].values()))
    mix = stored_mix(per_seed[0])
    _, capacity = experiment_topology(summary.get("uplink_mbps"))
    model = model_prediction(mix, capacity, "off-fair", summary.get("rtt_s"))
    mean = model["predicted_mean_jct_s"]
    assert sum(a["predicted"] for a in out["off-fair"].values()) / len(mix) == pytest.approx(
        mean, abs=1e-3)
    assert sum(a["predicted_startup"] for a in out["off-fair"].values()) / len(mix) == \
        pytest.approx(model["predicted_mean_startup_s"], abs=1e-3)
    assert sum(a["startup"] for a in out["off-fair"].values()) == pytest.approx(
        sum(s["startup_s"] for s in run["time_split"].values()))
    assert len(table(out)) == 2 + len(run["bucket_sizes"])
    assert len(phase_table(out)) == 2 + len(run["bucket_sizes"])
    # one seed: the two one-phase errors add up to the model's error (each phase's miss)
    phases = phase_errors(per_seed, predict(per_seed, summary), ["off-fair"])["off-fair"]
    assert phases["startup_only_pct"] + phases["rest_only_pct"] == pytest.approx(
        100 * (mean / run["mean_jct_s"] - 1), abs=0.2)
    # per mode, as the experiment's summary reads it, with the model's bound
    rows = by_mode(per_seed, summary, ["off", "off-fair", "remaining", "remaining+off-fair"])
    assert rows["off-fair"]["predicted_mean_jct_s"] == pytest.approx(mean, abs=1e-3)
    assert rows["off-fair"]["model_error_pct"] == pytest.approx(
        100 * (mean / run["mean_jct_s"] - 1), abs=0.1)
    best = summary["best_baseline"]
    assert rows[best]["predicted_vs_best_baseline_pct"] == 0.0
    lines = mode_table(rows, best, summary)      # a run made with remaining the default
    assert len(lines) == 2 + 4 + 2 and "The model's figure for `remaining`" in lines[-1]


def test_model_by_bucket_reads_pias_and_the_swept_depth_as_the_run_had_them():
    """A stored verdict with ``pias`` and a swept ``off-shallow``: the reading predicts
    ``pias`` with the thresholds of the run's mix and load, and ``off-shallow`` at the
    depth its sweep chose, not the default depth."""
    import json

    from bench.fabric.model_by_bucket import by_mode
    from mininet_fabric import baselines as bl
    from mininet_tests.heavy_tail import host_tagging
    from mininet_tests.heavy_tail.config import HeavyTailConfig
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from mininet_tests.heavy_tail.predict import model_prediction
    from mininet_tests.heavy_tail.run import stored_mix

    stored = REPO / "bench/results/priority-rules"
    per_seed = json.loads((stored / "verdict-0.9-bbr-per-seed.json").read_text())[:1]
    summary = json.loads((stored / "verdict-0.9-bbr-summary.json").read_text())
    assert summary["shallow_depth_sweep"]
    rows = by_mode(per_seed, summary, ["off-shallow", "pias"])
    mix = stored_mix(per_seed[0])
    _, capacity = experiment_topology(summary.get("uplink_mbps"))
    workload = host_tagging.workload(HeavyTailConfig(load=summary["load"]))
    default = model_prediction(mix, capacity, "off-shallow", summary["rtt_s"])
    with bl.swept_shallow(summary["load"], summary["host_cc"]) as swept:
        assert swept is not None
        for mode in ("off-shallow", "pias"):
            want = model_prediction(mix, capacity, mode, summary["rtt_s"], workload)
            assert rows[mode]["predicted_mean_jct_s"] == pytest.approx(
                want["predicted_mean_jct_s"], abs=1e-3)
    assert rows["off-shallow"]["predicted_mean_jct_s"] != pytest.approx(
        default["predicted_mean_jct_s"], abs=1e-3)


def test_the_rule_on_fair_leaves_waits_behind_the_urgent_classes_queue(monkeypatch):
    """The model's rule on fair-queued leaves: the urgent classes keep the FIFO leaf's
    queue ahead of a lower class (measured: the same egress backlog on either leaf), so a
    stored seed's mean JCT is predicted within 10 % of the rule on FIFO leaves, and slower
    than if the fair leaves left only a DRR round ahead of every message."""
    import json

    from mininet_fabric import baselines as bl
    from mininet_fabric.priority import LEAF_QUEUE_PACKETS
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from mininet_tests.heavy_tail.predict import model_prediction
    from mininet_tests.heavy_tail.run import stored_mix
    from sluice_common.exchange import MTU_BYTES

    assert bl.urgent_bytes("off-fair") == LEAF_QUEUE_PACKETS * MTU_BYTES
    assert bl.urgent_bytes("off") is None and bl.urgent_bytes("off-shallow") is None
    stored = REPO / "bench/results/priority-rules"
    seed = json.loads((stored / "heavy-tail-0.7-fq100-per-seed.json").read_text())[0]
    mix = stored_mix(seed)
    _, capacity = experiment_topology(12.0)
    mean = {m: model_prediction(mix, capacity, m, 0.001)["predicted_mean_jct_s"]
            for m in ("remaining", "remaining+off-fair")}
    assert mean["remaining+off-fair"] == pytest.approx(mean["remaining"], rel=0.10)
    monkeypatch.setattr(bl, "urgent_bytes", lambda baseline: None)
    drr_only = model_prediction(mix, capacity, "remaining+off-fair", 0.001)
    assert mean["remaining+off-fair"] > drr_only["predicted_mean_jct_s"]


def test_model_by_depth_reads_a_stored_sweep_depth_by_depth(tmp_path):
    """bench.fabric.model_by_depth: each swept FIFO read at its own depth (the deep one as
    ``off``), the measured medians those of the sweep, the depths registered only while
    read; the plot is a PNG."""
    import json
    import statistics

    from bench.fabric.model_by_depth import by_depth, plot, table
    from mininet_fabric import baselines as bl

    path = REPO / "bench/results/priority-rules/sweep-fifo-0.7-cubic-per-seed.json"
    per_seed = json.loads(path.read_text())
    summary, rows = by_depth(str(path))
    assert list(rows) == [5, 11, 25, 50, 100, 200]
    for depth, mode in ((25, "fifo-25"), (200, "off")):
        assert rows[depth]["mean_jct_s"] == pytest.approx(
            statistics.median(s["modes"][mode]["mean_jct_s"] for s in per_seed))
    # below the senders' backlog a FIFO's depth moves the wait, it does not remove it: the
    # 5-packet FIFO, with more drops, is predicted no faster than the 50-packet one
    assert rows[5]["predicted_mean_jct_s"] >= rows[50]["predicted_mean_jct_s"]
    assert not any(n.startswith("fifo-") for n in bl.names())
    assert len(table("x", rows)) == 2 + 6
    png = plot([(summary, rows)], tmp_path / "depth.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
