"""The exchange model as the scheduler prices jobs: the estimator's fixed exchange term,
the simulator's queue wait per message round by priority class, and `sluice simulate
--exchange`."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from job_scheduler.core.estimator import Estimator
from job_scheduler.core.exchange_pricing import (HARDWARE_HOP_S, KEY_BYTES, ExchangePricing,
                                                 cross_rack_rates)
from sluice_common.placement import Placement
from job_scheduler.simulation.simulator import Simulator
from sluice_common import exchange as ex
from support.sim_jobs import CROSS_A, CROSS_B, Pinned, job
from topologies import load_topology

TWO_RACK = load_topology("two-rack")
C = replace(ex.ExchangeConstants(), queue_fill=0.5)


def test_fixed_part_and_transfer_make_the_batch():
    for b, k, path, w in [(1e6, 8, (3e6, 1.5e6, 1.5e6, 3e6), 0), (2e5, 3, (1e6,), 2),
                          (5e4, 1, (), 0)]:
        assert ex.fixed_batch_s(k, path, w, C) + ex.transfer_s(b, k, path, w, C) == \
            pytest.approx(ex.batch_exchange_s(b, k, path, w, C))


def test_queue_wait_is_the_busy_share_of_the_filled_queue():
    # one job ahead sending half the time: half the time a round meets fill * Q / C
    assert ex.queue_wait_s([0.5], 1e6, 3e5, C) == pytest.approx(0.5 * 0.5 * 0.3)
    # two ahead: busy 1 - 0.5 * 0.5 = 0.75
    assert ex.queue_wait_s([0.5, 0.5], 1e6, 3e5, C) == pytest.approx(0.75 * 0.5 * 0.3)
    assert ex.queue_wait_s([], 1e6, 3e5, C) == 0.0
    assert ex.queue_wait_s([0.5], 2e6, 3e5, C) < ex.queue_wait_s([0.5], 1e6, 3e5, C)
    with pytest.raises(ValueError):
        ex.queue_wait_s([0.5], 0.0, 3e5, C)


def test_pricing_takes_the_topologys_cross_rack_path_and_its_hop_time():
    rates = cross_rack_rates(TWO_RACK)
    assert len(rates) >= 3                           # host link, uplinks, host link
    real = ExchangePricing.for_topology(TWO_RACK, constants=C)
    assert real.constants.hop_s == HARDWARE_HOP_S and real.scale == 1.0
    assert real.path == tuple(r * 1e6 / 8 for r in rates)
    emu = ExchangePricing.for_topology(load_topology("two-rack-100g"), emulated=True,
                                       constants=C)
    assert emu.constants.hop_s == C.hop_s            # the calibrated, emulated datapath
    scale = load_topology("two-rack-100g").emulation_bw_scale
    assert emu.scale == scale
    # the emulated workers move their bytes times the scale: fewer keys; a queue at the
    # scaled rate waits 1/scale as long
    assert emu.keys(KEY_BYTES * 100) == max(1, -(-KEY_BYTES * 100 * scale // KEY_BYTES))
    assert emu.round_wait_s([0.5], 1000.0) == pytest.approx(
        real.round_wait_s([0.5], 1000.0) / scale)
    assert scale < 1 and max(emu.path) <= max(cross_rack_rates(
        load_topology("two-rack-100g"))) * scale * 1e6 / 8 * (1 + 1e-9)
    # keys: the bytes in 4 MiB buckets; the fixed time grows with them
    assert real.keys(1) == 1 and real.keys(KEY_BYTES * 2.5) == 3
    assert real.fixed_s(KEY_BYTES * 10) > real.fixed_s(KEY_BYTES)
    # the emulated fabric's rounds cost far more than a hardware fabric's
    assert emu.fixed_s(1e6) > real.fixed_s(1e6)


def test_estimator_with_pricing_adds_the_fixed_term_and_keeps_comm_proportional():
    spec = job("x", m=20000)
    plain = Estimator()
    pricing = ExchangePricing.for_topology(TWO_RACK, constants=C)
    priced = Estimator(exchange=pricing)
    assert priced.link_efficiency == C.efficiency
    nbytes = priced.batch_bytes(spec)
    # one GPU: its PS on its own host, the in-host fixed time per batch (no round trips)
    per_batch = C.overhead_s + pricing.keys(nbytes) * C.per_key_s
    assert pricing.fixed_s(nbytes, ()) == pytest.approx(per_batch)
    assert priced.cost1(spec) == pytest.approx(
        plain.cost1(spec) + per_batch * priced.iterations(spec, 1))
    fixed = pricing.fixed_s(nbytes) * priced.iterations(spec, 4)      # path None: cross-rack
    assert priced.cost(spec, 4) == pytest.approx(plain.cost(spec, 4) + fixed)
    assert pricing.fixed_s(nbytes) > pricing.fixed_s(nbytes, (1000.0,)) > per_batch
    assert priced.comm(spec, 4, 500.0) == pytest.approx(2 * priced.comm(spec, 4, 1000.0))
    # the bytes at the bottleneck: push + pull, less the idle shaper's burst each way
    assert pricing.wire_bytes(nbytes) == pytest.approx(2 * nbytes - 2 * C.burst_bytes)
    assert priced.comm(spec, 4, 1000.0) == pytest.approx(
        plain.comm(spec, 4, 1000.0) * pricing.wire_bytes(nbytes) / (2 * nbytes) / C.efficiency)
    with pytest.raises(ValueError, match="window 0"):
        Estimator(exchange=replace(pricing, window=2))


def _start_all(sim: Simulator, pins: Pinned) -> Simulator:
    """Start every job of ``sim`` now on its pinned placement (no run loop)."""
    for j in range(len(sim.jobs)):
        sim.waiting[j] = None
        sim.start(j, pins.placements[sim.jobs[j].name])
    return sim


def _slow_fabric_pricing() -> ExchangePricing:
    """The two-rack fabric's path with a deep buffer, so that queueing shows."""
    return replace(ExchangePricing.for_topology(TWO_RACK, constants=C), buffer_bytes=50e6)


def test_sharing_an_uplink_queues_each_round_and_priority_spares_the_urgent_job():
    jobs = [job("a", m=80000), job("b", m=10000)]
    pins = Pinned({"a": CROSS_A, "b": CROSS_B})
    est = Estimator(exchange=_slow_fabric_pricing())
    off = _start_all(Simulator(TWO_RACK, jobs, pins, slot=1.0, estimator=est), pins)
    a, b = off.running[0], off.running[1]
    assert a.round_wait > 0 and b.round_wait > 0                # each waits behind the other
    on = _start_all(Simulator(TWO_RACK, jobs, pins, slot=1.0, estimator=est,
                              priority="remaining"), pins)
    # b, the shorter job, is alone in its class: no queue ahead of it; a waits behind b
    assert on.running[1].round_wait == 0.0
    assert on.running[0].round_wait > 0.0
    # whole runs: queueing only slows jobs; with priority the shorter one runs as if alone
    plain = Simulator(TWO_RACK, jobs, pins, slot=1.0, estimator=est).run()
    alone_b = Simulator(TWO_RACK, jobs[1:], pins, slot=1.0, estimator=est).run().jct[0]
    res_on = Simulator(TWO_RACK, jobs, pins, slot=1.0, estimator=est, priority="remaining").run()
    assert plain.jct[1] > alone_b
    assert res_on.jct[1] == pytest.approx(alone_b, rel=1e-6)
    assert res_on.avg_jct < plain.avg_jct


def test_in_rack_jobs_pay_no_uplink_queue():
    inside = Placement("c", ("h1",), ("h2",) * 2)
    est = Estimator(exchange=_slow_fabric_pricing())
    jobs = [job("c", m=20000), job("d", m=20000)]
    pins = Pinned({"c": inside, "d": CROSS_B})
    sim = _start_all(Simulator(TWO_RACK, jobs, pins, slot=1.0, estimator=est), pins)
    assert sim.running[0].round_wait == 0.0


def test_simulate_cli_exchange_option(capsys):
    from sluice.cli import main

    args = ["simulate", "--workload", "end_to_end/data/demo_jobs.yaml", "--topology",
            "two-rack-100g", "--policies", "lyapunov", "--slot", "1", "--json"]

    def simulate(*extra: str) -> dict:
        assert main(args + list(extra)) == 0
        return json.loads(capsys.readouterr().out)

    plain, priced, emulated = (simulate(), simulate("--exchange", "cluster"),
                               simulate("--exchange", "emulated"))
    assert "exchange" not in plain and priced["exchange"] == "cluster"
    # the exchange's rounds and queues only add time; on the emulated fabric an in-host
    # exchange runs over the loopback (the model's local_Bps) where the cluster pays its
    # host bus (intra_bw), and the demo's jobs fit in hosts
    jct = [r["policies"]["lyapunov"]["avg_jct"] for r in (plain, priced, emulated)]
    assert jct[0] < jct[1] and jct[2] < jct[1]
    assert main(args + ["--exchange", "cluster", "--no-network"]) == 2
    assert "--exchange" in capsys.readouterr().err

