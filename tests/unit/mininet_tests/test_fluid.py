"""The fluid model of the ranking rules and the heavy-tailed job mix (pure)."""

import statistics

import pytest

from mininet_tests.heavy_tail.predict import alone_s, fluid_jobs, same_start_mix
from mininet_tests.heavy_tail.measure import bottleneck_mbps, bucket_of, p95
from mininet_tests.heavy_tail.fabric_setup import experiment_topology
from mininet_tests.fluid import FluidJob, mean, simulate
from mininet_tests.heavy_tail.mix import bounded_pareto, heavy_tail_mix, offered_load

C = 50e6 / 8


def test_three_equal_link_bound_jobs_srpt_is_a_third_faster():
    # Jobs that can fill both directions alone (rate_cap 2): fair sharing finishes all
    # three at 3T, shortest-remaining-first at T, 2T, 3T: mean 2T vs 3T.
    jobs = [FluidJob(f"j{i}", 0.0, 10, 1e6, 2.0) for i in range(3)]
    t = 2 * 10 * 1e6 / (2 * C)
    off, srpt = simulate(jobs, "off", C), simulate(jobs, "remaining", C)
    assert mean(off.values()) == pytest.approx(3 * t, rel=0.02)
    assert mean(srpt.values()) == pytest.approx(2 * t, rel=0.02)
    assert sorted(srpt.values()) == pytest.approx([t, 2 * t, 3 * t], rel=0.02)


def test_rate_capped_jobs_do_not_contend():
    # Two jobs that each use a third of the link never slow each other down.
    jobs = [FluidJob("a", 0.0, 10, 1e6, 0.6), FluidJob("b", 0.0, 10, 1e6, 0.6)]
    alone = 2 * 10 * 1e6 / (0.6 * C)
    for mode in ("off", "progress", "remaining", "attained"):
        assert all(v == pytest.approx(alone, rel=0.02) for v in simulate(jobs, mode, C).values())


def test_rules_are_work_conserving():
    # Jobs that can fill the link alone: one busy period, whatever the order.
    jobs = [FluidJob(f"j{i}", i * 0.5, 5 + 7 * i, 2e5 * (i + 1), 2.0) for i in range(5)]
    finish = {m: max(j.arrival + simulate(jobs, m, C)[j.name] for j in jobs)
              for m in ("off", "remaining", "attained", "progress")}
    assert max(finish.values()) == pytest.approx(min(finish.values()), rel=0.03)


def test_same_start_sanity_case_predicts_about_a_third():
    from dataclasses import replace

    mix = same_start_mix(C)

    def gain(fj):
        return 1 - mean(simulate(fj, "remaining", C).values()) / mean(simulate(fj, "off", C).values())

    # link-bound (each job alone fills both directions): shortest-first saves about a third
    assert 0.25 <= gain([replace(j, rate_cap=2.0) for j in fluid_jobs(mix, C)]) <= 0.34
    # the emulated jobs' exchange (the calibrated exchange model: 3 of 8 keys in flight,
    # 1.5 key-times a key, at the link's payload efficiency, plus the ps-lite rounds) fills
    # less than 2 / 1.5 of the two directions: less left to gain
    from sluice_common.exchange import default_constants

    caps = [j.rate_cap for j in fluid_jobs(mix, C)]
    assert all(0 < cap < 2 / 1.5 * default_constants().efficiency for cap in caps)
    assert 0.05 <= gain(fluid_jobs(mix, C)) < 0.25
    assert alone_s(mix[0], C) > 0


def test_bounded_pareto_stays_in_bounds_and_is_heavy():
    xs = [bounded_pareto(i / 1000, 1.1, 10, 1000) for i in range(1000)]
    assert min(xs) == pytest.approx(10) and max(xs) <= 1000
    assert statistics.median(xs) < 25 < statistics.mean(xs)


def test_heavy_tail_mix_is_seeded_and_offers_the_load():
    a, b = heavy_tail_mix(3, 0.7, C), heavy_tail_mix(3, 0.7, C)
    assert a == b and a != heavy_tail_mix(4, 0.7, C)
    assert offered_load(a, C) == pytest.approx(0.7, rel=0.15)
    for j in a:
        assert 0.3 <= j.comm_fraction <= 0.7
        exchange = 2 * j.bytes_per_batch / C
        assert exchange / (exchange + j.compute_s) == pytest.approx(j.comm_fraction, abs=0.01)
    with pytest.raises(ValueError):
        heavy_tail_mix(1, 1.2, C)


def test_profile_compute_mix_keeps_the_sizes_and_is_communication_dominated():
    from mininet_tests.heavy_tail.predict import profile_compute_s

    compute = profile_compute_s()           # AlexNet, batch 32, on the H100 profile
    assert 0 < compute < 0.02
    share, fixed = heavy_tail_mix(3, 0.7, C), heavy_tail_mix(3, 0.7, C, compute_s=compute)
    # the same seed draws the same sizes and arrivals; only the compute differs
    assert [(j.batches, j.bytes_per_batch, j.arrival) for j in share] == \
        [(j.batches, j.bytes_per_batch, j.arrival) for j in fixed]
    assert offered_load(fixed, C) == pytest.approx(0.7, rel=0.15)
    for j in fixed:
        assert j.compute_s == pytest.approx(compute, abs=1e-4)
        exchange = 2 * j.bytes_per_batch / C
        assert j.comm_fraction == pytest.approx(exchange / (exchange + compute), abs=0.01)
        assert j.comm_fraction > 0.8
    with pytest.raises(ValueError):
        heavy_tail_mix(1, 0.7, C, compute_s=-1.0)


def test_measurement_helpers():
    assert p95([1, 2, 3, 4, 100]) == pytest.approx(80.8)
    mix = heavy_tail_mix(1, 0.7, C)
    assert {bucket_of(j, (1e6, 1e7)) for j in mix} <= {"small", "medium", "large"}
    result = {"jobs": [{"start": 0, "finish": 10}, {"start": 2, "finish": 8}],
              "links": [{"t": 1, "tx_mbps": {"tor2>spine1": 40, "tor1>spine1": 30}},
                        {"t": 5, "tx_mbps": {"tor2>spine1": 48, "tor1>spine1": 46}}]}
    got = bottleneck_mbps(result)
    assert got["samples"] == 1 and got["push"] == 48 and got["mean"] == 47
    assert got["utilisation_pct"] is None               # no capacity given
    assert bottleneck_mbps(result, 50.0)["utilisation_pct"] == 94.0


def test_experiment_topology_rescales_every_link_to_the_uplink_rate():
    builtin, capacity = experiment_topology(None)
    assert capacity == 50e6 / 8
    slow, capacity = experiment_topology(12.0)
    assert capacity == pytest.approx(12e6 / 8)
    # the host links keep their ratio to the uplink (the queue stays at the ToR egress)
    host = {h.name: h.bw for h in slow.hosts}["h1"] * slow.emulation_bw_scale
    assert host == pytest.approx(24.0)
    with pytest.raises(ValueError, match="uplinks. rate must be > 0"):
        experiment_topology(0)


def test_exchange_model_serial_bulk_and_pipelined_windows():
    from sluice_common.exchange import key_times

    assert key_times(8, 0) == pytest.approx(16.0)       # push all, then pull all
    assert key_times(8, 1) == pytest.approx(16.0)       # one key at a time: no overlap
    assert key_times(8, 3) == pytest.approx(12.0)       # the experiment's window
    # never better than the ideal pipeline (one key's push or pull exposed), never worse
    # than serial
    for w in range(0, 9):
        assert 9.0 <= key_times(8, w) <= 16.0
    with pytest.raises(ValueError):
        key_times(0, 1)


def test_a_rule_sees_batches_as_the_controller_counts_them():
    """The controller's reports count batches, not kv.init's exchange; PIAS's hosts count
    every byte their flows sent."""
    from mininet_tests.fluid import seen_bytes

    assert seen_bytes(1.0, 1, 1e5, host_tagged=False) == 0.0
    assert seen_bytes(3.5, 1, 1e5, host_tagged=False) == pytest.approx(5e5)
    assert seen_bytes(1.0, 1, 1e5, host_tagged=True) == pytest.approx(2e5)
    assert seen_bytes(0.5, 0, 1e5, host_tagged=False) == pytest.approx(1e5)
