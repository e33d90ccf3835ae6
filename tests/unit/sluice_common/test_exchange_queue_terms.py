"""The exchange model's queue terms: the loss and timeout term of a
shallow FIFO, the per-flow fair-share term of the fair queue, and their calibration on
the calibration's own probe mix."""

from dataclasses import replace

import pytest

from sluice_common.exchange import ExchangeConstants, Sharer, egress_state
from sluice_common.exchange_waits import (MSS_BYTES, backlog_bytes, fair_round_wait_s,
                                          fifo_round_wait_s, loss_wait_s, overflow_share, queue_wait_s, tail_share)

C = ExchangeConstants(overhead_s=0.01, per_key_s=0.002, hop_s=0.0005, efficiency=0.8,
                      local_Bps=100e6, queue_fill=0.5, burst_bytes=15000.0, rto_min_s=0.2,
                      loss_timeouts=1.5, fair_round_bytes=20000.0)
CROSS = (3e6, 1.5e6, 1.5e6, 3e6)


def test_overflow_is_what_the_senders_bursts_bring_beyond_the_fifo():
    # two others sending at once: three bursts arrive, a FIFO of one burst holds a third
    assert overflow_share([1.0, 1.0], 15000.0, C) == pytest.approx(2 / 3)
    assert overflow_share([0.5], 15000.0, C) == pytest.approx(1 - 1 / 1.5)
    # the deep FIFO holds every burst: no loss
    assert overflow_share([1.0] * 6, 200 * 1514.0, C) == 0.0
    # shallower FIFOs lose more
    assert overflow_share([1.0], 5000.0, C) > overflow_share([1.0], 10000.0, C) > 0


def test_loss_wait_is_busy_times_overflow_times_timeouts():
    ahead = [0.5, 0.5]
    expected = (1 - 0.25) * overflow_share(ahead, 15000.0, C) * 1.5 * 0.2
    assert loss_wait_s(ahead, 15000.0, C) == pytest.approx(expected)
    assert loss_wait_s([], 15000.0, C) == 0.0                 # alone: nothing to collide with
    assert loss_wait_s(ahead, 200 * 1514.0, C) == 0.0         # the deep FIFO
    assert loss_wait_s(ahead, 15000.0, replace(C, loss_timeouts=0.0)) == 0.0
    assert fifo_round_wait_s(ahead, 1.5e6, 15000.0, C) == pytest.approx(
        queue_wait_s(ahead, 1.5e6, 15000.0, C) + expected)
    with pytest.raises(ValueError):
        loss_wait_s(ahead, -1.0, C)


def test_a_fifo_shorter_than_the_backlog_moves_the_wait_it_does_not_remove_it():
    deep, mid, short = 200 * 1514.0, 50 * 1514.0, 15000.0
    backlog = replace(C, backlog_bytes=150000.0, loss_timeouts=0.0)
    assert backlog_bytes(short, backlog) == backlog_bytes(mid, backlog) == 150000.0
    assert backlog_bytes(deep, backlog) == deep          # a deeper FIFO holds it all
    assert backlog_bytes(mid, C) == mid                  # no backlog: the FIFO's own bytes
    ahead = [0.5, 0.5]
    # below the backlog every depth waits the same standing bytes ...
    assert fifo_round_wait_s(ahead, 1.5e6, short, backlog) == pytest.approx(
        fifo_round_wait_s(ahead, 1.5e6, mid, backlog))
    assert fifo_round_wait_s(ahead, 1.5e6, mid, backlog) == pytest.approx(
        queue_wait_s(ahead, 1.5e6, 150000.0, backlog))
    # ... above it the FIFO's depth counts, as without the term
    assert fifo_round_wait_s(ahead, 1.5e6, deep, backlog) == pytest.approx(
        fifo_round_wait_s(ahead, 1.5e6, deep, replace(backlog, backlog_bytes=0.0)))
    # a class below waits the upper classes' backlog, not only what their FIFO holds
    jobs = [Sharer("urgent", 8e5, 8, CROSS, 0.05, 3, cls=0),
            Sharer("bulk", 8e5, 8, CROSS, 0.05, 3, cls=1)]
    slow, _ = egress_state(jobs, 1.5e6, mid, backlog)
    fast, _ = egress_state(jobs, 1.5e6, mid, replace(backlog, backlog_bytes=0.0))
    assert slow["bulk"] > fast["bulk"]
    with pytest.raises(ValueError, match="backlog_bytes"):
        replace(C, backlog_bytes=-1.0)


def test_only_a_drop_fast_retransmit_cannot_recover_needs_a_timeout():
    assert tail_share(None) == 1.0 and tail_share(120) == 1.0      # control messages
    assert tail_share(3 * MSS_BYTES) == 1.0
    assert tail_share(30 * MSS_BYTES) == pytest.approx(0.1)      # a drop in its last 3 of 30
    assert loss_wait_s([0.5], 15000.0, C, 30 * MSS_BYTES) == pytest.approx(
        0.1 * loss_wait_s([0.5], 15000.0, C))
    # a job's start-up rounds (control messages) pay the whole term, its bulk keys less
    jobs = [Sharer(f"j{k}", 8e5, 8, CROSS, 0.05, 3) for k in range(3)]
    plain = replace(C, loss_timeouts=0.0)
    its, waits = egress_state(jobs, 1.5e6, 15000.0, C)
    its0, waits0 = egress_state(jobs, 1.5e6, 15000.0, plain)
    for n in its:
        per_round_batch = (its[n] - its0[n]) / 6                 # 2 * ceil(8 / 3) rounds
        assert waits[n] - waits0[n] > 5 * per_round_batch > 0


def test_fair_round_wait_grows_with_the_other_active_flows():
    assert fair_round_wait_s([], 1.5e6, C) == 0.0
    assert fair_round_wait_s([0.5, 0.5], 1.5e6, C) == pytest.approx(1.0 * 20000 / 1.5e6)
    assert fair_round_wait_s([1.0] * 4, 1.5e6, C) == pytest.approx(4 * 20000 / 1.5e6)
    with pytest.raises(ValueError):
        fair_round_wait_s([0.5], 0.0, C)


def test_the_terms_reach_the_fixed_point_only_on_their_own_queue():
    jobs = [Sharer(f"j{k}", 4e5, 8, CROSS, 0.05, 3) for k in range(4)]
    no_terms = replace(C, loss_timeouts=0.0, fair_round_bytes=0.0)
    # the short FIFO: the loss term makes every job slower
    shallow, shallow_plain = (egress_state(jobs, 1.5e6, 15000.0, c)[0] for c in (C, no_terms))
    assert all(shallow[n] > shallow_plain[n] for n in shallow)
    # the deep FIFO: no loss, so the constant changes nothing
    deep, deep_plain = (egress_state(jobs, 1.5e6, 3e5, c)[0] for c in (C, no_terms))
    assert deep == pytest.approx(deep_plain)
    # fair leaves: the per-flow term makes every job slower; the loss term is not applied
    fair, fair_plain = (egress_state(jobs, 1.5e6, 15000.0, c, urgent_bytes=3e5)[0]
                        for c in (C, replace(no_terms, loss_timeouts=C.loss_timeouts)))
    assert all(fair[n] > fair_plain[n] for n in fair)


def test_bad_constants_are_refused():
    with pytest.raises(ValueError, match="loss_timeouts"):
        replace(C, loss_timeouts=-1.0)
    with pytest.raises(ValueError, match="fair_round_bytes"):
        replace(C, fair_round_bytes=-1.0)


def test_the_queue_stage_fits_back_constants_the_model_itself_measured():
    """Probe JCTs made by the model at known ``loss_timeouts`` and ``fair_round_bytes``
    give them back; a figure no value can reach is clamped and says so."""
    from bench.fabric.calibration_runs import bisect_constant
    from bench.fabric.calibrate_queues import (STAGES, fit_queues, model_probe_jct,
                                               queue_mix, stage_mix)
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
    # a stage the measurements lack keeps its constant (an older calibration's --from)
    kept, partial = fit_queues(start, {"rtt_s": rtt_s, "runs": {
        q: r for q, r in runs.items() if q != "priority"}}, capacity)
    assert kept.priority_cost == 1.0 and "priority" not in partial
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
    """``calibrate_queues --from A --from B``: each stage's measurements come from the first
    stored run that has it, whichever tool wrote it, and keep their RTT, date and source."""
    import json

    from bench.fabric.calibrate_queues import gather

    run = {"jobs": {}, "tcp": {"retrans_segs": 1, "timeouts": 0}, "load": "1 1 1"}
    whole = tmp_path / "whole.json"             # calibrate_exchange --json
    whole.write_text(json.dumps({"measured": {
        "queues": {"rtt_s": 0.0007, "runs": {"off-shallow": run, "off-fair": run}},
        "started": "s20", "load_before": "0", "load_after": "1"}}))
    stage = tmp_path / "stage.json"             # calibrate_queues --json
    stage.write_text(json.dumps({"measured": {
        "runs": {"backlog": {**run, "rtt_s": 0.0005, "started": "s26", "load_before": "0",
                             "load_after": "2", "refit_from": None}}}}))
    got = gather(("off-shallow", "backlog"), [str(whole), str(stage)])["runs"]
    assert list(got) == ["off-shallow", "backlog"]
    assert (got["off-shallow"]["rtt_s"], got["off-shallow"]["started"]) == (0.0007, "s20")
    assert got["off-shallow"]["refit_from"] == str(whole)
    assert (got["backlog"]["rtt_s"], got["backlog"]["started"]) == (0.0005, "s26")
    assert got["backlog"]["refit_from"] == str(stage)
