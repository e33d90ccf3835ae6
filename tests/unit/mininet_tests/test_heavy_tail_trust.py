"""The simulator beside the heavy-tail verdict runs: what it models, what it does not, and
the mix's jobs as it takes them."""

from __future__ import annotations

import json
import math

import pytest

from end_to_end.trust_verdict import CANNOT, MET, NOT_MET
from mininet_tests import heavy_tail_trust as ht
from mininet_tests.heavy_tail import simulate as hs
from mininet_tests.heavy_tail.mix import MixJob
from mininet_tests.heavy_tail.predict import SLOT_S, model_exchange_s
from support.paths import REPO

STORED = REPO / "bench" / "results" / "priority-rules"
RUN = "verdict-0.7-bbr"                 # seeds 6-10
MODES = ["off", "off-shallow", "off-fair", "pias", "progress", "remaining", "attained",
         "remaining+off-shallow", "remaining+off-fair"]


def test_only_unknown_modes_lack_a_model():
    for mode in ("remaining", "off-shallow", "off-fair", "remaining+off-fair", "off", "pias"):
        assert ht.mode_gaps(mode) == []
    assert "'nonsense'" in ht.mode_gaps("nonsense")[-1]
    assert ht.gap_reason(ht.mode_gaps("nonsense")).startswith("the simulator has no model of ")


def test_a_stored_verdict_run_gives_every_modelled_mode_a_simulated_figure():
    rows = ht.compare_run(STORED / f"{RUN}-summary.json")
    assert [r.case for r in rows] == MODES
    assert {r.run for r in rows} == {RUN}
    by_mode = {r.case: r for r in rows}
    for mode in MODES:
        assert by_mode[mode].verdict() in (MET, NOT_MET), by_mode[mode].why_not()
        assert by_mode[mode].simulated > 0
    summary = json.loads((STORED / f"{RUN}-summary.json").read_text())
    assert rows[0].measured == summary["modes"]["off"]["mean_jct_s"]


def test_pias_needs_the_mix_s_size_distribution_for_its_thresholds(tmp_path):
    summary = json.loads((STORED / f"{RUN}-summary.json").read_text())
    del summary["bytes_lo"]
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "per_seed.json").write_text((STORED / f"{RUN}-per-seed.json").read_text())
    rows = {r.case: r for r in ht.compare_run(tmp_path)}
    assert rows["pias"].verdict() == CANNOT and "size distribution" in rows["pias"].why_not()
    assert rows["off"].verdict() in (MET, NOT_MET)


def test_a_seed_without_a_mode_s_figure_is_named(tmp_path):
    per_seed = json.loads((STORED / f"{RUN}-per-seed.json").read_text())
    per_seed[1]["modes"]["remaining"]["mean_jct_s"] = math.nan
    del per_seed[2]["modes"]["pias"]
    (tmp_path / "per_seed.json").write_text(json.dumps(per_seed))
    rows = {r.case: r for r in ht.compare_run(tmp_path)}
    assert rows["remaining"].measured is None
    assert "seed(s) 7 have no finite mean JCT for remaining" in rows["remaining"].why_not()
    assert "seed(s) 8" in rows["pias"].why_not()
    # no summary beside it: the fabric is unknown, so nothing is simulated
    assert "uplink_mbps" in rows["off"].why_not() and rows["off"].verdict() == CANNOT


def test_a_seed_without_its_mix_cannot_be_simulated(tmp_path):
    per_seed = json.loads((STORED / f"{RUN}-per-seed.json").read_text())
    del per_seed[0]["mix"]
    (tmp_path / "per_seed.json").write_text(json.dumps(per_seed))
    (tmp_path / "summary.json").write_text((STORED / f"{RUN}-summary.json").read_text())
    rows = {r.case: r for r in ht.compare_run(tmp_path)}
    assert rows["off"].verdict() == CANNOT and "records no mix" in rows["off"].why_not()


def test_a_run_that_cannot_be_read_is_one_cannot_judge_row(tmp_path):
    (tmp_path / "per_seed.json").write_text("[]")
    rows = ht.compare_run(tmp_path)
    assert len(rows) == 1 and rows[0].verdict() == CANNOT
    assert "cannot be read" in rows[0].why_not()


def test_the_mix_s_jobs_carry_their_own_batch_and_one_for_kv_init():
    mix = [MixJob("ht00", 0.0, 3, 400_000, 0.5, 0.0042)]
    (spec,) = hs.mix_jobs(mix)
    assert spec.dataset_size == 32 * 4 and spec.max_gpus == 1
    assert spec.extra == {"bytes_per_batch": 400_000, "compute_s": 0.0042, "keys": 8,
                          "window": 3}


def test_a_job_alone_takes_its_batches_and_the_model_s_start_up():
    mix = [MixJob("ht00", 0.0, 9, 600_000, 0.5, 0.0042)]
    capacity = 12.0 * 1e6 / 8
    alone = 10 * (0.0042 + model_exchange_s(600_000, capacity))
    got = hs.simulated_mean_jct(mix, "off", 12.0, 0.0008)
    from sluice_common.exchange import default_constants
    assert got == pytest.approx(alone + default_constants().startup_s, rel=0.03)
    assert hs.simulated_mean_jct(mix, "pias", 12.0, 0.0008) is None     # no thresholds


def test_pias_ranks_by_bytes_sent_at_its_thresholds_and_a_small_job_passes_a_big_one():
    from mininet_fabric import baselines as bl
    from mininet_tests.heavy_tail.connection_sizes import connection_sizes

    big = MixJob("ht00", 0.0, 60, 600_000, 0.5, 0.0042)
    small = MixJob("ht01", 0.5, 3, 100_000, 0.5, 0.0042)
    workload = bl.Workload(connection_sizes(0.1, 150_000), 0.7)
    thresholds = bl.pias_thresholds(workload)
    assert list(thresholds) == sorted(thresholds) and thresholds[0] < 60 * 600_000
    fifo = hs.simulated_mean_jct([big, small], "off", 12.0, 0.0008)
    pias = hs.simulated_mean_jct([big, small], "pias", 12.0, 0.0008, workload=workload)
    assert pias < fifo                   # the small one no longer waits behind the big one
    rule, _, got = hs.mode_pricing(hs.experiment_topology(12.0)[0], "pias", 12.0, 0.0008,
                                   None, workload)
    assert (rule, got) == ("attained", thresholds)


def test_the_placement_is_the_experiment_s():
    mix = [MixJob(f"ht{i:02d}", 0.1 * i, 5, 300_000, 0.5, 0.0042) for i in range(3)]
    from job_scheduler.core.estimator import Estimator
    from job_scheduler.simulation.simulator import Simulator
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology

    topology, _ = experiment_topology(12.0)
    jobs = hs.mix_jobs(mix)
    sim = Simulator(topology, jobs, hs.MixPlacement([j.name for j in jobs]),
                    estimator=Estimator(), slot=SLOT_S)
    sim.run()
    assert [(p.ps_hosts, p.worker_hosts) for p in sim.placements] == [
        (("h1",), ("h3",)), (("h2",), ("h4",)), (("h1",), ("h3",))]


def test_a_loss_based_congestion_control_keeps_the_fifo_fuller_than_bbr():
    from sluice_common.exchange_waits import standing_fill

    assert standing_fill("bbr", 0.6) == 0.6 and standing_fill(None, 0.6) == 0.6
    assert standing_fill("cubic", 0.6) == pytest.approx(0.85)     # (1 + 0.7) / 2
    assert standing_fill("reno", 0.6) == pytest.approx(0.75)      # (1 + 0.5) / 2
    assert standing_fill("CUBIC", 0.9) == 0.9                      # never below calibrated
    mix = [MixJob(f"ht{i:02d}", 0.05 * i, 30, 600_000, 0.5, 0.0042) for i in range(4)]
    bbr = hs.simulated_mean_jct(mix, "off", 12.0, 0.0008, host_cc="bbr")
    cubic = hs.simulated_mean_jct(mix, "off", 12.0, 0.0008, host_cc="cubic")
    assert cubic > bbr                  # a message waits behind a fuller FIFO
    # per-flow fair queueing: a bulk flow's round waits its own bucket, which its senders
    # keep as full as they keep the FIFO; a small job's sparse flow waits one DRR round
    fair = [hs.simulated_mean_jct(mix, "off-fair", 12.0, 0.0008, host_cc=cc)
            for cc in ("bbr", "cubic")]
    assert fair[1] > fair[0]
    # small jobs arriving among two bulk ones: their sparse flows pass the bulk backlog
    probes = mix[:2] + [MixJob(f"ht{i:02d}", 2.0 + i, 3, 20_000, 0.5, 0.0042)
                        for i in range(2, 5)]
    sparse = [hs.simulated_mean_jct(probes, mode, 12.0, 0.0008, host_cc="cubic")
              for mode in ("off", "off-fair")]
    assert sparse[1] < 0.95 * sparse[0]


def test_a_bulk_flow_waits_the_deep_backlog_unless_its_hosts_back_off_on_loss():
    from mininet_fabric import baselines as bl
    from sluice_common.exchange_waits import backs_off_on_loss

    assert backs_off_on_loss("cubic") and backs_off_on_loss("Reno")
    assert not backs_off_on_loss("bbr") and not backs_off_on_loss(None)
    topology = hs.experiment_topology(12.0)[0]
    deep = bl.queue_bytes("off", 12.0, 0.0008)
    got = {(mode, cc): hs.mode_pricing(topology, mode, 12.0, 0.0008, 50, None, cc)[1]
           .bulk_backlog_bytes for mode in ("off-shallow", "off-fair") for cc in ("bbr", "cubic")}
    assert got == {("off-shallow", "bbr"): deep, ("off-shallow", "cubic"): None,
                   ("off-fair", "bbr"): deep, ("off-fair", "cubic"): deep}
    # BBR's bulk jobs wait the same backlog at a 50-packet FIFO as at the deep one (it
    # sits at their senders), and pay the shallow FIFO's drops on top
    mix = [MixJob(f"ht{i:02d}", 0.05 * i, 30, 600_000, 0.5, 0.0042) for i in range(4)]
    off = hs.simulated_mean_jct(mix, "off", 12.0, 0.0008, host_cc="bbr")
    shallow = {cc: hs.simulated_mean_jct(mix, "off-shallow", 12.0, 0.0008, shallow_packets=50,
                                         host_cc=cc) for cc in ("bbr", "cubic")}
    assert shallow["bbr"] >= off * (1 - 1e-9)
    assert shallow["cubic"] < hs.simulated_mean_jct(mix, "off", 12.0, 0.0008, host_cc="cubic")


def test_the_exchange_model_s_prediction_takes_the_congestion_control_as_the_simulator_does():
    from mininet_tests.heavy_tail.predict import model_prediction

    mix = [MixJob(f"ht{i:02d}", 0.05 * i, 30, 600_000, 0.5, 0.0042) for i in range(4)]
    capacity = 12.0 * 1e6 / 8
    bbr, machine, cubic = (model_prediction(mix, capacity, "off", 0.0008, host_cc=cc)
                           ["predicted_mean_jct_s"] for cc in ("bbr", None, "cubic"))
    assert bbr == machine < cubic
