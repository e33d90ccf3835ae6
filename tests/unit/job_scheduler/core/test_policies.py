"""Policies: each one's decision rule, through the same simulator."""

from __future__ import annotations

import statistics

import pytest

from job_scheduler.core import proteus
from job_scheduler.core.estimator import Estimator
from sluice_common.jobspec import JobSpec
from job_scheduler.core.policies import (POLICY_NAMES, LyapunovPolicy, make_policy,
                                         parse_policy_names)
from job_scheduler.simulation.simulator import Simulator, simulate
from job_scheduler.simulation.workloads import load_workload
from sluice_common.errors import InputError
from topologies import load_topology

TWO_RACK = load_topology("two-rack")


def job(name, arrival=0.0, max_gpus=4, model="resnet50", m=20000, **kw):
    return JobSpec(name=name, model=model, dataset_size=m, epochs=1, batch_size=32,
                   max_gpus=max_gpus, arrival=arrival, **kw)


def test_unknown_policy_is_bad_input():
    with pytest.raises(InputError, match="unknown policy 'nope'"):
        parse_policy_names("lyapunov,nope")
    with pytest.raises(InputError):
        make_policy("nope")
    assert parse_policy_names("fifo, las,fifo") == ["fifo", "las"]


def test_every_policy_finishes_every_job_of_a_scenario():
    jobs = load_workload("proteus-small-concentrated", jobs=25, seed=3)
    for name in POLICY_NAMES:
        res = simulate(TWO_RACK, jobs, make_policy(name, seed=3), slot=10.0)
        assert res.jobs == 25 and all(x > 0 for x in res.jct), name
        assert all(1 <= g <= j.max_gpus for g, j in zip(res.gpus, sorted(jobs, key=lambda j: j.arrival))), name


def test_single_gives_one_gpu_and_fifo_the_requested_count():
    jobs = [job(f"j{i}", arrival=i * 5.0, max_gpus=g) for i, g in enumerate([4, 2, 8, 1])]
    assert simulate(TWO_RACK, jobs, make_policy("single")).gpus == [1, 1, 1, 1]
    assert simulate(TWO_RACK, jobs, make_policy("fifo")).gpus == [4, 2, 8, 1]


def test_random_is_seeded_and_in_range():
    jobs = [job(f"j{i}", arrival=i * 5.0, max_gpus=8) for i in range(30)]
    a = simulate(TWO_RACK, jobs, make_policy("random", seed=5)).gpus
    b = simulate(TWO_RACK, jobs, make_policy("random", seed=5)).gpus
    c = simulate(TWO_RACK, jobs, make_policy("random", seed=6)).gpus
    assert a == b and a != c
    assert all(1 <= g <= 8 for g in a) and len(set(a)) > 3


def test_fifo_blocks_head_of_line_and_tetris_backfills():
    jobs = [job("big", max_gpus=12, m=200000), job("huge", arrival=1.0, max_gpus=16),
            job("small", arrival=2.0, max_gpus=2)]
    fifo = simulate(TWO_RACK, jobs, make_policy("fifo"), slot=1.0)
    tetris = simulate(TWO_RACK, jobs, make_policy("tetris"), slot=1.0)
    # fifo: 'small' waits behind 'huge', which waits for 'big'; tetris starts it at once
    assert fifo.jct[2] > fifo.jct[0]
    assert tetris.jct[2] < fifo.jct[2] and tetris.jct[2] < tetris.jct[0]


def test_las_preempts_a_long_job_for_a_newcomer():
    jobs = [job("long", max_gpus=16, m=400000), job("short", arrival=600.0, max_gpus=4)]
    fifo = simulate(TWO_RACK, jobs, make_policy("fifo"), slot=1.0)
    las = simulate(TWO_RACK, jobs, make_policy("las"), slot=1.0)
    # 'long' has passed the 3,600 GPU-s threshold at t=600 (16 GPUs): it drops to the
    # low queue and 'short' runs at once instead of waiting for 'long' to end
    assert las.jct[1] < fifo.jct[1] / 2
    assert las.jct[0] > fifo.jct[0]


@pytest.mark.parametrize("k", proteus.K_READINGS)
def test_lyapunov_lone_job_follows_the_proteus_decision(k):
    """A lone job on an empty cluster: Q = Cost(1), Z = 0 at its first slot; it waits
    while S(n) >= 0 for all n and then takes proteus.decide's n."""
    spec = job("a", max_gpus=8)
    pol = LyapunovPolicy(V=100.0, eps=2000.0, k=k)
    sim = Simulator(TWO_RACK, [spec], pol, slot=10.0)
    res = sim.run()
    model = sim.models[0]
    # replay the queues by hand
    Q, Z, t = model.cost1, 0.0, 0.0
    while True:
        costs, _ = LyapunovPolicy(V=100.0)._costs(Simulator(TWO_RACK, [spec], pol), 0, 8)
        n = proteus.decide(costs, model.cost1, Q, Z, 100.0, 16, 8, k)
        if n:
            break
        Z = proteus.update_Z(Z, Q, 2000.0, 0.0)
        t += 10.0
    assert res.gpus == [n] and res.avg_wait == pytest.approx(t)


def test_lyapunov_V_trades_completion_time_for_backlog():
    """Neely's O(1/V), O(V) trade-off, seen through the simulator over a sweep of V: a
    larger V buys a smaller average C(n) of the started jobs (it waits for a better
    count) at the price of a larger average Q. The workload needs contention for GPU
    counts: a burst of jobs with mixed max_gpus, so that a host is often partly busy
    (with one cap for all jobs every job finds a whole free host and C cannot move).
    eps and the V sweep are scaled to the job sizes of the P100 profile, so it is pinned."""
    jobs = load_workload("proteus-small-concentrated", jobs=40, seed=0, caps="mixed")
    served_C, backlog = [], []
    for V in (1e2, 1e3, 1e4, 1e5):
        pol = make_policy("lyapunov", V=V, eps=6000.0)
        simulate(TWO_RACK, jobs, pol, slot=10.0, in_host=False, estimator=Estimator("p100"))
        served_C.append(statistics.mean(pol.served_C))
        backlog.append(statistics.mean(pol.backlog))
    assert all(a >= b for a, b in zip(served_C, served_C[1:])), served_C
    assert all(a <= b for a, b in zip(backlog, backlog[1:])), backlog
    assert served_C[-1] < 0.95 * served_C[0] and backlog[-1] > 1.2 * backlog[0]


def test_lyapunov_uses_placement_bandwidth():
    """C(n) for the decision comes from the best-fit placement: 4 GPUs fit on one host
    (exchange over its 100 Gbit/s bus, 4 flows), 8 span two hosts and pay Comm(8) on
    the shared host link."""
    spec = job("a", max_gpus=8, model="vgg16")
    sim = Simulator(TWO_RACK, [spec], make_policy("lyapunov"))
    costs, places = sim.policy._costs(sim, 0, 8)
    model = sim.models[0]
    assert costs[4] == pytest.approx(model.cost(4) + model.comm(4, 25_000.0))
    assert len(set(places[8].worker_hosts)) == 2
    assert costs[8] == pytest.approx(model.cost(8) + model.comm(8, 2500.0))


def test_lyapunov_batch_is_reproducible_with_ga():
    jobs = load_workload("proteus-big-concentrated", jobs=30, seed=1)
    a = simulate(TWO_RACK, jobs, make_policy("lyapunov", seed=2), slot=10.0)
    b = simulate(TWO_RACK, jobs, make_policy("lyapunov", seed=2), slot=10.0)
    assert a.jct == b.jct and a.gpus == b.gpus


def test_placement_override_keeps_the_policy_and_swaps_placement():
    pol = make_policy("fifo", placement="best-fit")
    assert pol.name == "fifo" and type(pol.placer).__name__ == "BestFitPlacement"
    with pytest.raises(InputError):
        make_policy("fifo", placement="worst-fit")


def test_counts_beyond_the_cluster_are_clamped_or_refused():
    jobs = [job("huge", max_gpus=64, m=2000)]
    res = simulate(TWO_RACK, jobs, make_policy("random", seed=1))
    assert 1 <= res.gpus[0] <= 16
    assert simulate(TWO_RACK, jobs, make_policy("lyapunov")).gpus[0] <= 16
    for name in ("fifo", "tetris", "las"):
        with pytest.raises(ValueError, match="needs 64 GPUs"):
            simulate(TWO_RACK, jobs, make_policy(name))
