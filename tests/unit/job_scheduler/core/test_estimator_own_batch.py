"""Jobs that state their own batch (bytes, compute, keys, window), a lone worker whose PS
is on another host, the fair queue and the exchange model's way of counting waits in the
pricing, and the simulator's options that price the exchange as that model does."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from job_scheduler.core.estimator import (OWN_BYTES, OWN_COMPUTE, OWN_KEYS, OWN_WINDOW,
                                          Estimator)
from job_scheduler.core.exchange_pricing import ExchangePricing
from sluice_common.placement import Placement
from job_scheduler.simulation.simulator import Simulator
from sluice_common import exchange as ex
from sluice_common.jobspec import JobSpec
from support.sim_jobs import Pinned, job
from topologies import load_topology

TWO_RACK = load_topology("two-rack")
EMULATED = ExchangePricing.for_topology(TWO_RACK, emulated=True)
REMOTE = Placement("own", ("h1",), ("h3",))        # the lone worker in rack 2, its PS in rack 1
LOCAL = Placement("own", ("h3",), ("h3",))


def own_job(name="own", batches=20, nbytes=600_000, compute=0.004, arrival=0.0, keys=8,
            window=3):
    return JobSpec(name=name, model="resnet18", dataset_size=32 * batches, epochs=1,
                   batch_size=32, max_gpus=1, arrival=arrival,
                   extra={OWN_BYTES: nbytes, OWN_COMPUTE: compute, OWN_KEYS: keys,
                          OWN_WINDOW: window})


def test_a_job_s_own_batch_replaces_the_model_s():
    est = Estimator(exchange=EMULATED)
    spec = own_job()
    assert est.cost_bat(spec) == 0.004
    assert est.batch_bytes(spec) == pytest.approx(600_000 / EMULATED.scale)
    assert est.rule_bytes(spec) == 600_000                 # as its workers report them
    model = job("m", model="resnet18")
    assert est.cost_bat(model) != 0.004 and not est.exchanges_alone(model)
    assert est.exchanges_alone(spec)
    # ps-lite's own keys and window: 8 keys, 3 in flight -> 6 rounds, 1.5 key-times a key
    assert EMULATED.rounds(est.batch_bytes(spec), 8, 3) == 6
    assert est.one_way_share(spec) == pytest.approx(8 / 12)
    assert est.one_way_share(model) == 0.5


def test_a_lone_worker_pays_its_exchange_only_with_its_own_batch():
    est = Estimator(exchange=EMULATED)
    spec, model = own_job(), job("m", model="resnet18", max_gpus=1)
    assert est.comm(spec, 1, 5000.0) > 0 and est.comm(model, 1, 5000.0) == 0.0
    assert est.comm(spec, 1, math.inf) == 0.0
    path = (10000.0, 5000.0, 5000.0, 10000.0)
    assert est.fixed_s(spec, 1, path) > est.fixed_s(spec, 1, ())
    assert est.fixed_s(model, 1, path) == est.fixed_s(model, 1, ())


def _sim(placement, jobs=None, **kw):
    jobs = jobs or [own_job()]
    return Simulator(TWO_RACK, jobs, Pinned({j.name: placement for j in jobs}),
                     estimator=Estimator(exchange=kw.pop("pricing", EMULATED)), **kw)


def test_the_simulator_sends_a_lone_worker_s_batches_to_its_remote_ps():
    remote, local = _sim(REMOTE), _sim(LOCAL)
    assert remote.base_bandwidth(REMOTE) == 5000.0 and math.isinf(local.base_bandwidth(LOCAL))
    far, near = remote.run(), local.run()
    est = Estimator(exchange=EMULATED)
    spec = own_job()
    alone = est.C(spec, 1, 5000.0, (10000.0, 5000.0, 5000.0, 10000.0))
    assert far.avg_jct == pytest.approx(alone, rel=1e-6)
    assert near.avg_jct < far.avg_jct / 5


def test_startup_holds_a_job_for_the_model_s_start_up():
    plain, held = _sim(REMOTE).run(), _sim(REMOTE, startup=True).run()
    assert held.avg_jct - plain.avg_jct == pytest.approx(EMULATED.startup_s(0.0), rel=1e-6)
    with pytest.raises(ValueError):
        Simulator(TWO_RACK, [own_job()], Pinned({}), startup=True)


def test_a_start_up_measured_on_the_runs_replaces_the_constants_alone_part():
    plain, held = _sim(REMOTE).run(), _sim(REMOTE, startup=True, startup_alone_s=0.7).run()
    rounds = EMULATED.startup_s(0.0) - EMULATED.constants.startup_s
    assert held.avg_jct - plain.avg_jct == pytest.approx(0.7 + rounds, rel=1e-6)
    assert EMULATED.startup_s(0.0, alone_s=0.7) == pytest.approx(0.7 + rounds)
    with pytest.raises(ValueError, match="startup_alone_s"):
        _sim(REMOTE, startup=True, startup_alone_s=-0.1)


def test_a_job_in_its_start_up_leaves_the_link_to_the_one_that_sends():
    jobs = [own_job("a", batches=40), own_job("b", batches=5, arrival=1.0)]
    places = {"a": Placement("a", ("h1",), ("h3",)), "b": Placement("b", ("h2",), ("h4",))}
    sim = Simulator(TWO_RACK, jobs, Pinned(places), estimator=Estimator(exchange=EMULATED),
                    startup=True, share="senders")
    seen = []
    sim.on_plan = lambda t, plan: seen.append((t, sim.running[0].bw if 0 in sim.running else None))
    sim.run()
    # when b starts (t = 1), it holds: a keeps its whole bandwidth
    assert seen[-1][0] == 1.0 and seen[-1][1] == 5000.0


def _started(sim):
    """``sim`` with every job started at 0 (each re-timed once the others run)."""
    for j in range(len(sim.jobs)):
        sim.waiting[j] = None
    sim.policy.step(sim)
    for run in list(sim.running.values()):
        sim.retime(run.j)
    return sim


def test_senders_share_gives_a_job_more_than_the_flow_count_when_others_idle():
    jobs = [own_job("a", compute=0.5), own_job("b", compute=0.5)]
    places = {"a": Placement("a", ("h1",), ("h3",)), "b": Placement("b", ("h2",), ("h4",))}

    def started(share):
        return _started(Simulator(TWO_RACK, jobs, Pinned(places),
                                  estimator=Estimator(exchange=EMULATED), share=share))

    flows, senders = started("flows"), started("senders")
    assert flows.running[0].bw == 2500.0 and 2500.0 < senders.running[0].bw < 5000.0
    with pytest.raises(ValueError):
        Simulator(TWO_RACK, jobs, Pinned(places), share="senders")


def test_fair_queue_waits_a_burst_not_the_whole_fifo():
    c = EMULATED.constants
    fair = replace(EMULATED, queue="fair", buffer_bytes=11 * ex.MTU_BYTES, urgent_bytes=3e5)
    assert fair.round_wait_s([0.6, 0.6], 5000.0) < EMULATED.round_wait_s([0.6, 0.6], 5000.0) / 5
    # behind more urgent classes it waits what they keep queued, at the link's full rate
    urgent = fair.round_wait_s([0.6, 0.6], 1000.0, urgent=[0.6], capacity_mbps=5000.0)
    rate = 5000.0 * EMULATED.scale * 1e6 / 8
    assert urgent == pytest.approx(ex.queue_wait_s([0.6], rate / 5, fair.buffer_bytes, c)
                                   + ex.queue_wait_s([0.6], rate, 3e5, c))
    with pytest.raises(ValueError):
        replace(EMULATED, queue="wfq")


def test_a_bulk_flow_waits_the_senders_backlog_a_sparse_one_a_burst():
    from sluice_common.exchange_waits import loss_wait_s, queue_wait_s

    c, deep, short = EMULATED.constants, 200 * ex.MTU_BYTES, 11 * ex.MTU_BYTES
    fair = replace(EMULATED, queue="fair", buffer_bytes=short, urgent_bytes=deep,
                   bulk_backlog_bytes=deep)
    fifo = replace(EMULATED, buffer_bytes=deep)
    ahead, bulk, sparse = [0.6, 0.6], 4 * c.burst_bytes, c.burst_bytes / 2
    # a bulk flow's own bucket holds its share of the backlog: it waits as in the FIFO
    assert fair.round_wait_s(ahead, 5000.0, in_flight_bytes=bulk) == pytest.approx(
        fifo.round_wait_s(ahead, 5000.0))
    assert (fair.round_wait_s(ahead, 5000.0, in_flight_bytes=sparse)
            == fair.round_wait_s(ahead, 5000.0) < fifo.round_wait_s(ahead, 5000.0) / 5)
    # a shallow FIFO: the deep backlog (the rest waits at the senders) and its own drops
    shallow = replace(EMULATED, buffer_bytes=short, bulk_backlog_bytes=deep)
    rate, many = 5000.0 * EMULATED.scale * 1e6 / 8, [0.9] * 6
    assert shallow.round_wait_s(many, 5000.0, in_flight_bytes=bulk) == pytest.approx(
        queue_wait_s(many, rate, deep, c) + loss_wait_s(many, short, c))
    assert shallow.round_wait_s(many, 5000.0, in_flight_bytes=sparse) == replace(
        shallow, bulk_backlog_bytes=None).round_wait_s(many, 5000.0, in_flight_bytes=bulk)
    # counted per pair: the urgent classes' backlog at the link's rate, then its class's
    pair = replace(fair, waits="pair")
    assert pair.round_wait_s(ahead, 1000.0, urgent=[0.6], capacity_mbps=5000.0,
                             in_flight_bytes=bulk) == pytest.approx(
        queue_wait_s([0.6], rate, deep, c) + queue_wait_s([0.6], rate / 5, deep, c)
        + loss_wait_s([0.6], deep, c))
    with pytest.raises(ValueError):
        replace(EMULATED, bulk_backlog_bytes=-1.0)


def test_a_flow_s_window_bytes_are_its_keys_in_flight():
    b = Estimator(exchange=EMULATED).batch_bytes(own_job(nbytes=800_000))
    assert EMULATED.window_bytes(b, 1, 8, 3) == pytest.approx(300_000)
    assert EMULATED.window_bytes(b, 2, 8, 3) == pytest.approx(150_000)
    assert EMULATED.window_bytes(b, 1, 8, 0) == pytest.approx(800_000)


def test_a_start_up_s_control_messages_are_sparse_on_fair_leaves():
    deep = 200 * ex.MTU_BYTES
    fair = replace(EMULATED, queue="fair", buffer_bytes=11 * ex.MTU_BYTES, urgent_bytes=deep,
                   bulk_backlog_bytes=deep)
    jobs = [own_job("a", batches=40), own_job("b", batches=40)]
    places = {"a": Placement("a", ("h1",), ("h3",)), "b": Placement("b", ("h2",), ("h4",))}
    sim = _started(Simulator(TWO_RACK, jobs, Pinned(places), estimator=Estimator(exchange=fair)))
    run = sim.running[0]
    sparse = sim._round_wait(run, sparse=True)
    assert 0 < sparse < sim._round_wait(run) / 5
    assert run.round_wait > 5 * sparse                    # its batches: a bulk flow's


def test_pair_waits_drain_the_urgent_queue_at_the_link_s_rate():
    pair = replace(EMULATED, waits="pair")
    lumped = EMULATED.round_wait_s([0.6, 0.6], 1000.0, urgent=[0.6], capacity_mbps=5000.0)
    assert lumped == EMULATED.round_wait_s([0.6, 0.6], 1000.0)      # the default: unchanged
    assert pair.round_wait_s([0.6, 0.6], 1000.0, urgent=[0.6], capacity_mbps=5000.0) < lumped
    assert pair.round_wait_s([0.6], 1000.0) == EMULATED.round_wait_s([0.6], 1000.0)
    with pytest.raises(ValueError):
        replace(EMULATED, waits="some")
    # a cross-rack round waits once for the pair of uplinks: half the sum of the two
    jobs = [own_job("a", batches=40), own_job("b", batches=40)]
    places = {"a": Placement("a", ("h1",), ("h3",)), "b": Placement("b", ("h2",), ("h4",))}
    sim = _started(Simulator(TWO_RACK, jobs, Pinned(places),
                             estimator=Estimator(exchange=EMULATED)))
    waits = {"uplinks": sim._round_wait(sim.running[0])}
    sim.estimator.exchange = pair               # the same shares, counted per pair
    waits["pair"] = sim._round_wait(sim.running[0])
    assert waits["pair"] == pytest.approx(waits["uplinks"] / 2) and waits["pair"] > 0


def test_rerank_recomputes_the_levels_every_slot_while_jobs_run():
    jobs = [own_job("a", batches=60), own_job("b", batches=60, arrival=2.0)]
    places = {"a": Placement("a", ("h1",), ("h3",)), "b": Placement("b", ("h2",), ("h4",))}
    frozen = Simulator(TWO_RACK, jobs, Pinned(places), estimator=Estimator(exchange=EMULATED),
                       priority="progress").run()
    moving = Simulator(TWO_RACK, jobs, Pinned(places), estimator=Estimator(exchange=EMULATED),
                       priority="progress", rerank=True).run()
    # frozen, the newcomer stays on top until a job ends; re-ranked, progress evens out
    assert moving.jct != frozen.jct
    assert abs(moving.jct[0] - moving.jct[1]) < abs(frozen.jct[0] - frozen.jct[1])
