"""The one exchange model (sluice_common.exchange): a batch alone, jobs sharing an egress."""

import math
from dataclasses import replace

import pytest

from sluice_common.exchange import (CTRL_BYTES, DATA_FILE, MTU_BYTES, ExchangeConstants, Sharer,
                                    batch_exchange_s, features, fixed_s, idle_restart_s,
                                    key_times, load_constants, path_rtt_s, rounds,
                                    save_constants, share_egress)

C = ExchangeConstants(overhead_s=0.01, per_key_s=0.002, hop_s=0.0005, efficiency=0.8,
                      local_Bps=100e6, queue_fill=0.5)
CROSS = (3e6, 1.5e6, 1.5e6, 3e6)      # host link, two uplinks, host link (bytes/s)
IN_RACK = (3e6, 3e6)


def test_key_times_and_rounds():
    assert key_times(8, 0) == pytest.approx(16.0)       # push all, then pull all
    assert key_times(8, 3) == pytest.approx(12.0)
    assert rounds(8, 0) == 2 and rounds(8, 8) == 2
    assert rounds(8, 3) == 6 and rounds(8, 1) == 16
    with pytest.raises(ValueError):
        rounds(0, 1)


def test_batch_alone_is_the_documented_formula():
    b, k, w = 1e6, 8, 3
    rtt = 2 * sum(C.hop_s + CTRL_BYTES / r for r in CROSS)
    fill = 2 * (sum(MTU_BYTES / r for r in CROSS) - MTU_BYTES / 1.5e6)
    x = (12 / 8 * b - 2 * C.burst_bytes) / (0.8 * 1.5e6)
    expect = C.overhead_s + k * C.per_key_s + 6 * rtt + fill + x
    assert path_rtt_s(CROSS, C) == pytest.approx(rtt)
    assert batch_exchange_s(b, k, CROSS, w, C) == pytest.approx(expect)
    # in-host: no hops, no shaper, the bytes at the loopback rate
    assert batch_exchange_s(b, k, (), 0, C) == pytest.approx(
        C.overhead_s + k * C.per_key_s + 2 * b / 100e6)
    # a batch smaller than one burst each way: only the rounds and the fill
    small = batch_exchange_s(1e4, 1, CROSS, 0, C)
    assert small == pytest.approx(C.overhead_s + C.per_key_s + 2 * rtt + fill)


def test_more_hops_and_slower_links_cost_more():
    b, k = 2e5, 4
    local, rack, cross = (batch_exchange_s(b, k, p, 0, C) for p in ((), IN_RACK, CROSS))
    assert local < rack < cross
    assert batch_exchange_s(2 * b, k, CROSS, 0, C) > cross
    assert batch_exchange_s(b, 2 * k, CROSS, 0, C) > cross      # per-key cost


def test_features_reproduce_the_model_for_the_fit():
    coef = (C.overhead_s, C.per_key_s, C.hop_s, 1 / C.efficiency, 1 / C.local_Bps)
    for path in ((), IN_RACK, CROSS):
        for b, k, w in ((1e5, 2, 0), (8e5, 8, 3), (3e6, 4, 1)):
            f = features(b, k, path, w, C.burst_bytes)
            got = sum(x * y for x, y in zip(f, coef)) + fixed_s(k, path, w)
            assert got == pytest.approx(batch_exchange_s(b, k, path, w, C))


def test_idle_restart_only_after_a_long_gap_on_a_long_pipe():
    # short gap: no restart; a pipe the initial window fills: no restart
    assert idle_restart_s(1e6, 8, CROSS, 0.01, 0.2, C) == 0.0
    assert idle_restart_s(1e6, 8, CROSS, 1.0, 0.001, C) == 0.0
    # 1.5 MB/s x 0.2 s = 300 KB pipe, 125 KB keys: log2(125000/15140 + 1) -> 4 rounds, both ways
    assert idle_restart_s(1e6, 8, CROSS, 1.0, 0.2, C) == pytest.approx(2 * 4 * 0.2)
    off = ExchangeConstants(slow_start_after_idle=False)
    assert idle_restart_s(1e6, 8, CROSS, 1.0, 0.2, off) == 0.0


def test_one_job_at_an_egress_runs_as_alone():
    j = Sharer("a", 1e6, 8, CROSS, 0.05, 3)
    assert share_egress([j], 1.5e6, 3e5, C)["a"] == pytest.approx(j.alone_s(C))


def test_fair_sharing_slows_equal_jobs_alike_and_adds_queueing():
    jobs = [Sharer(f"j{i}", 1e6, 8, CROSS, 0.01, 3) for i in range(3)]
    alone = jobs[0].alone_s(C)
    got = share_egress(jobs, 1.5e6, 3e5, C)
    assert len(set(round(v, 9) for v in got.values())) == 1
    t = got["j0"]
    # three link-bound jobs: each direction carries the three jobs' bytes per iteration
    # (at most the payload rate), and no job waits more than for both others' whole
    # exchange plus each round's queue
    assert 3 * 1e6 / (C.efficiency * 1.5e6) <= t
    assert t < 3 * alone + rounds(8, 3) * C.queue_fill * 3e5 / 1.5e6 + 1e-9
    no_queue = share_egress(jobs, 1.5e6, 0.0, C)["j0"]
    assert no_queue < t


def test_compute_bound_jobs_barely_contend():
    jobs = [Sharer(f"j{i}", 1e5, 2, CROSS, 2.0, 0) for i in range(2)]
    alone = jobs[0].alone_s(C)
    for v in share_egress(jobs, 1.5e6, 3e5, C).values():
        assert alone < v < 1.1 * alone


def test_strict_priority_first_class_as_alone_last_class_waits():
    fair = [Sharer(f"j{i}", 1e6, 8, CROSS, 0.3, 3) for i in range(3)]
    ranked = [Sharer(j.name, j.bytes_per_batch, j.keys, j.path, j.compute_s, j.window, i)
              for i, j in enumerate(fair)]
    off, on = share_egress(fair, 1.5e6, 3e5, C), share_egress(ranked, 1.5e6, 3e5, C)
    assert on["j0"] == pytest.approx(fair[0].alone_s(C))
    assert on["j0"] < off["j0"] and on["j2"] > off["j2"]
    assert on["j0"] < on["j1"] < on["j2"]


def test_fair_leaves_spare_a_message_its_own_class_but_not_the_urgent_classes_queue():
    """With fair-queued leaves (``urgent_bytes`` given) a message waits a DRR round in its
    own class (``buffer_bytes``) and the urgent classes' queue (``urgent_bytes``) above it:
    one class is the FIFO model with the round as its buffer; the most urgent class never
    waits the urgent term; a lower class waits more the deeper the urgent queue."""
    from sluice_common.exchange import egress_state
    bulk = Sharer("bulk", 1e6, 4, CROSS, 0.0, 0)
    small = Sharer("small", 2e4, 4, CROSS, 0.01, 0)
    one_class = [bulk, small]
    assert egress_state(one_class, 1.5e6, 2e4, C, urgent_bytes=3e5)[1] == \
        pytest.approx(egress_state(one_class, 1.5e6, 2e4, C)[1])
    ranked = [replace(bulk, cls=0), replace(small, cls=1)]
    shallow = egress_state(ranked, 1.5e6, 2e4, C, urgent_bytes=0.0)[1]
    deep = egress_state(ranked, 1.5e6, 2e4, C, urgent_bytes=3e5)[1]
    assert deep["bulk"] == shallow["bulk"] == 0.0
    # the urgent queue goes first, drained at the link's full rate: at most its depth / C
    assert shallow["small"] + 0.1 * 3e5 / 1.5e6 < deep["small"] <= shallow["small"] + 3e5 / 1.5e6
    # the FIFO leaves' one queue of 3e5 bytes costs the lower class about as much
    fifo = egress_state(ranked, 1.5e6, 3e5, C)[1]
    assert deep["small"] == pytest.approx(fifo["small"], rel=0.05)
    with pytest.raises(ValueError):
        egress_state(ranked, 1.5e6, 2e4, C, urgent_bytes=-1.0)


def test_shared_link_never_carries_more_than_its_capacity():
    jobs = [Sharer(f"j{i}", 5e5 * (i + 1), 4, CROSS, 0.02 * i, 0) for i in range(4)]
    for cls in (None, 0):
        js = [Sharer(j.name, j.bytes_per_batch, j.keys, j.path, j.compute_s, j.window,
                     None if cls is None else n) for n, j in enumerate(jobs)]
        got = share_egress(js, 1.5e6, 3e5, C)
        used = sum(2 * j.bytes_per_batch / got[j.name] for j in js)   # both directions
        assert used <= 2 * C.efficiency * 1.5e6 * 1.001


def test_constants_file_round_trip_and_checks(tmp_path):
    shipped = load_constants()
    assert shipped.provenance.get("command")
    assert DATA_FILE.exists()
    path = save_constants(C, tmp_path / "c.yaml", comment="test")
    back = load_constants(path)
    assert back == C
    (tmp_path / "bad.yaml").write_text("overhead_s: 0.1\nbogus: 1\n")
    with pytest.raises(ValueError, match="bogus"):
        load_constants(tmp_path / "bad.yaml")
    with pytest.raises(ValueError):
        ExchangeConstants(efficiency=1.5)
    assert math.isfinite(batch_exchange_s(1e6, 8, CROSS, 3))       # shipped constants


def test_batch_simulation_alone_and_shortest_remaining_first():
    from mininet_tests.fluid import BatchJob, mean, simulate_batches

    one = BatchJob("a", 0.0, 20, 2e5, 0.01, 4, 0, CROSS)
    alone = Sharer("a", 2e5, 4, CROSS, 0.01, 0).alone_s(C)
    got = simulate_batches([one], "off", 1.5e6, 3e5, C, startup_s=0.5)
    assert got["a"] == pytest.approx(0.5 + 20 * alone, rel=1e-3)
    jobs = [BatchJob(f"j{i}", 0.0, 10 * (i + 1), 2e5, 0.01, 4, 0, CROSS) for i in range(3)]
    off = simulate_batches(jobs, "off", 1.5e6, 3e5, C)
    srpt = simulate_batches(jobs, "remaining", 1.5e6, 3e5, C)
    assert mean(srpt.values()) < 0.9 * mean(off.values())
    # the largest job gains little: it runs last, in what the others leave (its own
    # class's queue, not the one FIFO's, so somewhat less than in one class)
    assert srpt["j0"] < off["j0"] and srpt["j2"] >= 0.9 * off["j2"]
    # each share a more urgent class uses costs the classes below priority_cost of theirs
    costly = simulate_batches(jobs, "remaining", 1.5e6, 3e5, replace(C, priority_cost=1.5))
    assert costly["j0"] == pytest.approx(srpt["j0"], rel=0.02) and costly["j2"] > srpt["j2"]
    # the rules run every job to its end
    for mode in ("progress", "attained"):
        assert set(simulate_batches(jobs, mode, 1.5e6, 3e5, C)) == {"j0", "j1", "j2"}


def test_startup_grows_with_the_queue_it_meets_and_priority_shortens_it():

    from mininet_tests.fluid import BatchJob, simulate_batches
    from sluice_common.exchange import egress_state, startup_time

    c = replace(C, startup_s=0.4, startup_rounds=10.0)
    assert startup_time(0.0, c) == pytest.approx(0.4)
    assert startup_time(0.2, c) == pytest.approx(2.4)
    assert startup_time(0.2, replace(c, startup_priority_s=0.3), priority=True) == \
        pytest.approx(2.7)
    with pytest.raises(ValueError):
        startup_time(-1.0, c)
    # the queue wait: nobody else sending -> 0; a bulk job in the same class -> most of
    # the time; the same bulk job in a less urgent class -> none
    bulk = Sharer("bulk", 1e6, 4, CROSS, 0.0, 0)
    small = Sharer("small", 2e4, 4, CROSS, 0.01, 0)
    assert egress_state([small], 1.5e6, 3e5, c)[1]["small"] == 0.0
    wait_off = egress_state([bulk, small], 1.5e6, 3e5, c)[1]["small"]
    wait_on = egress_state([replace(bulk, cls=1), replace(small, cls=0)], 1.5e6, 3e5, c)[1]["small"]
    assert wait_off > 0.4 * 0.5 * 3e5 / 1.5e6 and wait_on < 0.1 * wait_off
    # more senders keep more of the FIFO full (queue_fill_per_sender)
    crowd = [Sharer(f"b{k}", 1e6, 4, CROSS, 0.0, 0) for k in range(5)]
    few = egress_state(crowd + [small], 1.5e6, 3e5, c)[1]["small"]
    more = egress_state(crowd + [small], 1.5e6, 3e5, replace(c, queue_fill_per_sender=0.2))[1]["small"]
    assert more > 1.5 * few
    # in the simulation: a job arriving behind a bulk job starts later with priority off
    jobs = [BatchJob("bulk", 0.0, 200, 1e6, 0.0, 4, 0, CROSS),
            BatchJob("small", 5.0, 2, 2e4, 0.01, 4, 0, CROSS)]
    off = simulate_batches(jobs, "off", 1.5e6, 3e5, c)
    on = simulate_batches(jobs, "remaining", 1.5e6, 3e5, c)
    alone = simulate_batches(jobs[1:], "off", 1.5e6, 3e5, c)
    assert alone["small"] < 0.4 + 3 * small.alone_s(c) + 0.01      # kv.init: one batch more
    assert off["small"] > alone["small"] + 0.5                     # its rendezvous queued
    assert on["small"] < off["small"] - 0.5
    fixed = simulate_batches(jobs, "off", 1.5e6, 3e5, c, startup_s=0.4, overhead_s=0.1)
    assert fixed["small"] < off["small"] and fixed["bulk"] > 0.1
    # the start-up as the experiments measure it: arrival to the first batch after
    # kv.init's, the driver's overhead included; the JCT is that and the batches
    started: dict = {}
    alone = simulate_batches(jobs[1:], "off", 1.5e6, 3e5, c, overhead_s=0.1, started=started)
    init = replace(small, compute_s=0.0)          # kv.init: no compute
    assert started["small"] == pytest.approx(0.1 + 0.4 + init.alone_s(c), rel=1e-3)
    assert alone["small"] == pytest.approx(started["small"] + 2 * small.alone_s(c), rel=1e-3)
    # kv.init pushes every key at once, then pulls (window 0), whatever the job's window
    piped = BatchJob("piped", 0.0, 3, 1e6, 0.01, 8, 3, CROSS)
    started = {}
    jct = simulate_batches([piped], "off", 1.5e6, 3e5, c, started=started)
    unpiped = Sharer("piped", 1e6, 8, CROSS, 0.0, 0).alone_s(c)
    windowed = Sharer("piped", 1e6, 8, CROSS, 0.01, 3).alone_s(c)
    assert unpiped > windowed
    assert started["piped"] == pytest.approx(0.4 + unpiped, rel=1e-3)
    assert jct["piped"] == pytest.approx(0.4 + unpiped + 3 * windowed, rel=1e-3)
    started = {}
    simulate_batches(jobs, "off", 1.5e6, 3e5, c, startup_s=0.4, started=started)
    assert started == {"bulk": pytest.approx(0.4), "small": pytest.approx(0.4)}
    started = {}
    simulate_batches(jobs, "off", 1.5e6, 3e5, c, started=started)
    assert started["small"] > 0.4 + small.alone_s(c) + 0.5         # behind the bulk job


def test_the_check_compares_each_scenario_with_the_model_per_discipline():
    """Measurements made by the model itself give 0 % error; a scenario measured 25 %
    slower gives -20 %; the resent share comes from the counters over the bytes sent."""
    from bench.fabric.check_exchange import compare, measured_figure, scenarios, sent_bytes
    from mininet_tests.calibration.runs import ARRIVING, model_figure
    from mininet_fabric.baselines import queues, urgent_bytes
    from mininet_tests.heavy_tail.predict import buffer_bytes
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology

    _, capacity = experiment_topology(12.0)
    mixes = scenarios()
    assert [len(m) for m in mixes.values()] == [1, 2, 6, 5, 8]
    runs = {}
    for disc in queues():
        buf = buffer_bytes(disc, capacity, 0.001)
        for name, mix in mixes.items():
            figure = model_figure(name, mix, capacity, buf, C, urgent_bytes(disc))
            slower = 1.25 if (disc, name) == ("off-fair", "two") else 1.0
            key = "jct_s" if name in ARRIVING else "iteration_s"
            jobs = {j.name: {"jct_s": 0.0, "iteration_s": 0.0} for j in mix}
            for j in mix:
                if (name in ARRIVING) == ("-probe-" in j.name):
                    jobs[j.name][key] = figure * slower
            assert measured_figure(name, jobs) == pytest.approx(figure * slower)
            runs[f"{disc}/{name}"] = {"jobs": jobs, "load": 1.0, "tcp": {
                "retrans_segs": 100, "timeouts": 2}}
    rows = compare({"runs": runs, "rtt_s": 0.001}, C)
    assert len(rows) == 15
    by = {(r["discipline"], r["scenario"]): r for r in rows}
    assert by["off-fair", "two"]["error_pct"] == pytest.approx(-20.0, abs=0.1)
    assert all(r["error_pct"] == pytest.approx(0.0, abs=0.1) for k, r in by.items()
               if k != ("off-fair", "two"))
    assert by["off", "six"]["resent_share"] == pytest.approx(100 * 1448 / sent_bytes(mixes["six"]),
                                                             abs=1e-4)
    # the deep FIFO's standing queue makes the model's two senders slower than the short ones'
    assert by["off", "two"]["model_s"] > by["off-shallow", "two"]["model_s"]
    assert compare({"runs": {}, "rtt_s": 0.001}, C) == []


def test_shallow_loss_bench_counts_resent_bytes_over_all_sent():
    """bench.fabric.shallow_loss: the share is resent bytes over all bytes sent (the jobs'
    own, both directions, kv.init's exchange included), and the model's iteration it
    prints beside the measured one is a shared one (slower than a job alone)."""
    from bench.fabric.shallow_loss import (MSS_BYTES, bulk_mix, model_iteration_s,
                                           retrans_share, sent_bytes)
    mix = bulk_mix()
    assert sent_bytes(mix) == sum(2 * j.bytes_per_batch * (j.batches + 1) for j in mix) > 0
    assert retrans_share(0, 1e6) == 0.0
    assert retrans_share(1000, 1000 * MSS_BYTES) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        retrans_share(-1, 1e6)
    from mininet_tests.calibration.runs import BULK, UPLINK_MBPS
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from mininet_tests.heavy_tail.predict import model_exchange_s
    _, capacity = experiment_topology(UPLINK_MBPS)
    assert model_iteration_s(0.001) > 1.5 * model_exchange_s(BULK[0], capacity)
