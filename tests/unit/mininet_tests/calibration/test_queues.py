"""The exchange model's queue stages (mininet_tests.calibration.queues): each constant
bisected until the model's figure meets the measured one, the stages fitted together, and
stored stages taken from earlier runs."""

from dataclasses import replace

import pytest

from sluice_common.exchange import ExchangeConstants

C = ExchangeConstants(overhead_s=0.01, per_key_s=0.002, hop_s=0.0005, efficiency=0.8,
                      local_Bps=100e6, queue_fill=0.5, burst_bytes=15000.0, rto_min_s=0.2,
                      loss_timeouts=1.5, fair_round_bytes=20000.0)


def test_the_queue_stage_fits_back_constants_the_model_itself_measured():
    """Probe JCTs made by the model at known ``loss_timeouts`` and ``fair_round_bytes``
    give them back; a figure no value can reach is clamped and says so."""
    from mininet_tests.calibration.queues import (STAGES, fit_queues, model_probe_jct,
                                                  queue_mix, stage_mix)
    from mininet_tests.calibration.runs import bisect_constant
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology

    _, capacity = experiment_topology(12.0)
    rtt_s = 0.001
    truth = replace(C, loss_timeouts=0.8, fair_round_bytes=30000.0, priority_cost=1.4,
                    backlog_bytes=150000.0)
    runs = {}
    for queue, stage in STAGES.items():
        jct = model_probe_jct(truth, queue, capacity, rtt_s)
        # a queue stage's figure is its probes' mean JCT, the priority stage's every job's
        jobs = {j.name: {"jct_s": jct if stage.priority or "-probe-" in j.name else 99.0,
                         "iteration_s": 1.0} for j in stage_mix(queue)}
        runs[queue] = {"jobs": jobs, "tcp": {"retrans_segs": 1, "timeouts": 0}, "load": "1 1 1"}
    start = replace(truth, loss_timeouts=0.0, fair_round_bytes=0.0, priority_cost=1.0,
                    backlog_bytes=0.0)
    got, report = fit_queues(start, {"rtt_s": rtt_s, "runs": runs}, capacity)
    assert got.loss_timeouts == pytest.approx(0.8, rel=1e-3)
    assert got.fair_round_bytes == pytest.approx(30000.0, rel=1e-3)
    assert got.priority_cost == pytest.approx(1.4, rel=1e-3)
    assert got.backlog_bytes == pytest.approx(150000.0, rel=1e-3)
    # a stage the measurements lack keeps its constant (an older calibration's --from);
    # one stage measured: the three others keep theirs
    kept, partial = fit_queues(start, {"rtt_s": rtt_s, "runs": {
        "off-shallow": runs["off-shallow"]}}, capacity)
    assert (kept.priority_cost, kept.fair_round_bytes, kept.backlog_bytes) == (1.0, 0.0, 0.0)
    assert set(partial) == {"off-shallow"} and kept.loss_timeouts != start.loss_timeouts
    assert not any(r["clamped"] for r in report.values())
    assert report["off-shallow"]["model_with_term_s"] == pytest.approx(
        report["off-shallow"]["probes_measured_s"], rel=1e-3)
    assert report["off-shallow"]["model_without_term_s"] < report["off-shallow"]["probes_measured_s"]
    # the probes are the stage's arriving jobs, among bulk jobs that arrive first
    mix = queue_mix("off-shallow")
    assert sum("-probe-" in j.name for j in mix) == 3 and sum("-bulk-" in j.name for j in mix) == 6
    assert min(j.arrival for j in mix if "-probe-" in j.name) > max(
        j.arrival for j in mix if "-bulk-" in j.name)
    # a measured figure below the model without the term: 0, clamped
    assert bisect_constant(lambda x: 1.0 + x, 0.5, 0.0, 10.0) == (0.0, True)
    assert bisect_constant(lambda x: 1.0 + x, 20.0, 0.0, 10.0) == (10.0, True)
    value, clamped = bisect_constant(lambda x: 1.0 + x, 4.0, 0.0, 10.0)
    assert value == pytest.approx(3.0, abs=1e-6) and not clamped


def test_stored_stages_are_refitted_beside_each_other_with_their_own_rtt(tmp_path):
    """``sluice calibrate queues --from A --from B``: each stage's measurements come from the first
    stored run that has it, whichever tool wrote it, and keep their RTT, date and source."""
    import json

    from mininet_tests.calibration.queues import gather

    run = {"jobs": {}, "tcp": {"retrans_segs": 1, "timeouts": 0}, "load": "1 1 1"}
    whole = tmp_path / "whole.json"             # sluice calibrate exchange --json
    whole.write_text(json.dumps({"measured": {
        "queues": {"rtt_s": 0.0007, "runs": {"off-shallow": run, "off-fair": run}},
        "started": "s20", "load_before": "0", "load_after": "1"}}))
    stage = tmp_path / "stage.json"             # sluice calibrate queues --json
    stage.write_text(json.dumps({"measured": {
        "runs": {"backlog": {**run, "rtt_s": 0.0005, "started": "s26", "load_before": "0",
                             "load_after": "2", "refit_from": None}}}}))
    got = gather(("off-shallow", "backlog"), [str(whole), str(stage)])["runs"]
    assert list(got) == ["off-shallow", "backlog"]
    assert (got["off-shallow"]["rtt_s"], got["off-shallow"]["started"]) == (0.0007, "s20")
    assert got["off-shallow"]["refit_from"] == str(whole)
    assert (got["backlog"]["rtt_s"], got["backlog"]["started"]) == (0.0005, "s26")
    assert got["backlog"]["refit_from"] == str(stage)
