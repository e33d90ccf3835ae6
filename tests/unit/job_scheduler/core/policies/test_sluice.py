"""The sluice policy: its pricing rule by hand, and its ordering, preemption and
regrowing through the simulator on a one-host cluster where every time is hand-checked."""

from __future__ import annotations

import pytest

from job_scheduler.core.estimator import Estimator
from sluice_common.jobspec import JobSpec
from job_scheduler.core.policies import make_policy
from job_scheduler.simulation.simulator import Simulator
from job_scheduler.core.policies.sluice import (SluicePolicy, choose_count, priced_penalty,
                                                worth_waiting)
from topologies import parse_topology

# The hand-checked cases below are sized for the P100-derived profile's step times.
P100 = Estimator("p100")

# one host, 4 GPUs
ONE_HOST = parse_topology({"name": "one-host", "switches": [{"name": "tor1"}],
                           "racks": [{"name": "r1", "tor": "tor1"}],
                           "hosts": [{"name": "h1", "rack": "r1", "gpus": 4, "bw": 10000}]})


def job(name, arrival=0.0, m=20000, max_gpus=4, model="resnet50"):
    return JobSpec(name=name, model=model, dataset_size=m, epochs=1, batch_size=32,
                   max_gpus=max_gpus, arrival=arrival)


def test_priced_penalty_and_count_by_hand():
    assert priced_penalty(40.0, 4, 0, 16) == 40.0
    assert priced_penalty(40.0, 4, 5, 16) == pytest.approx(40.0 * (1 + 20 / 16))
    costs = {1: 100.0, 2: 55.0, 4: 45.0}
    # nobody behind: lyapunov's argmin C(n)
    assert choose_count(costs, behind=0, total_gpus=16) == 4
    # 5 behind on 16 GPUs: n=1 -> 100*(1+5/16) = 131.25; n=2 -> 55*(1+10/16) = 89.4;
    # n=4 -> 45*(1+20/16) = 101.25
    assert choose_count(costs, behind=5, total_gpus=16) == 2
    # a long queue: the most efficient count, one GPU (n*C(n) smallest)
    assert choose_count(costs, behind=100, total_gpus=16) == 1
    assert choose_count({}, 0, 16) == 0
    assert worth_waiting(C_now=100.0, C_full=40.0, wait_s=30.0)
    assert not worth_waiting(C_now=100.0, C_full=40.0, wait_s=70.0)


def test_short_job_preempts_long_one_and_the_resume_pays_the_cost():
    """Ideal fabric, 4 GPUs. A (long) starts at 0 on 4 GPUs. B (a tenth of A's work)
    arrives at 10 s: A has 90 % of its work left, far more than 2 x B's + the cost, so A
    is suspended, B runs on all 4 GPUs, then A resumes after a 10 s restore."""
    a, b = job("a", m=40000), job("b", arrival=10.0, m=4000)
    sim = Simulator(ONE_HOST, [a, b], make_policy("sluice"), slot=1.0, estimator=P100, network=False)
    res = sim.run()
    ca, cb = sim.models[0].cost(4), sim.models[1].cost(4)
    assert cb < 0.5 * ca and ca > 20            # the premise of the scenario
    jct = dict(zip(["a", "b"], res.jct))
    assert jct["b"] == pytest.approx(cb, abs=1.0)          # starts at once (slot 1 s)
    b_end = 10.0 + jct["b"]
    # A: 10 s done before, then the restore, then the remaining (ca - 10) s
    assert jct["a"] == pytest.approx(b_end + 10.0 + (ca - 10.0), abs=1.0)
    assert sim.preemptions == 1


def test_no_preemption_for_a_near_tie():
    """B has more than half of A's remaining work: not worth a suspension."""
    a, b = job("a", m=20000), job("b", arrival=1.0, m=15000)
    sim = Simulator(ONE_HOST, [a, b], make_policy("sluice"), slot=1.0, estimator=P100, network=False)
    sim.run()
    assert sim.preemptions == 0


def _held(names_m, policy):
    """A job holding all 4 GPUs from 0, then the given jobs arriving at 1 s."""
    jobs = [job("hold", m=8000)] + [job(n, arrival=1.0, m=m) for n, m in names_m]
    sim = Simulator(ONE_HOST, jobs, policy, slot=1.0, estimator=P100, network=False)
    res = sim.run()
    return dict(zip([j.name for j in sim.jobs], res.jct))


def test_shortest_predicted_first_and_blind_jobs_by_attained_service():
    jobs = [("long", 40000), ("short", 4000), ("mid", 20000)]
    jct = _held(jobs, SluicePolicy(preempt=False))
    assert jct["short"] < jct["mid"] < jct["long"]
    # "long" without an estimate (job index 1: arrival order hold, long, short, mid) is
    # ordered by its attained service, 0 GPU-seconds: it goes before the others
    jct = _held(jobs, SluicePolicy(preempt=False, blind=frozenset({1})))
    assert jct["long"] < jct["short"] and jct["long"] < jct["mid"]


def test_queue_pricing_spreads_a_burst():
    """In-host exchange charged: four jobs at once on 4 GPUs. lyapunov gives the head
    job all 4 (argmin C(n)); sluice prices the jobs behind and gives it fewer, and the
    average JCT is lower. A job alone later gets lyapunov's count again."""
    jobs = [job(f"j{i}", m=20000, model="vgg16") for i in range(4)]
    sl = Simulator(ONE_HOST, jobs, make_policy("sluice"), slot=1.0, estimator=P100).run()
    ly = Simulator(ONE_HOST, jobs, make_policy("lyapunov"), slot=1.0, estimator=P100).run()
    assert ly.gpus == [4, 4, 4, 4] and sl.gpus == [1, 1, 1, 1]
    assert sl.avg_jct < 0.7 * ly.avg_jct
    alone = [job("late", m=20000, model="vgg16")]
    assert (Simulator(ONE_HOST, alone, make_policy("sluice"), slot=1.0, estimator=P100).run().gpus
            == Simulator(ONE_HOST, alone, make_policy("lyapunov"), slot=1.0, estimator=P100).run().gpus)


def test_regrow_resizes_a_job_left_small_by_a_burst():
    """vgg16 (exchange-heavy) burst of three short jobs and a long one on 4 GPUs: priced,
    each starts on one GPU (the long one too, told not to wait for more). When the short
    ones end and nothing waits, the long one is resized to lyapunov's count for a job
    alone, paying one restore."""
    jobs = ([job(f"s{i}", m=20000, model="vgg16") for i in range(3)]
            + [job("long", m=80000, model="vgg16")])
    sim = Simulator(ONE_HOST, jobs, SluicePolicy(wait_for_gpus=False), slot=1.0, estimator=P100)
    res = sim.run()
    assert sim.preemptions == 1                      # the resize
    alone = Simulator(ONE_HOST, [jobs[3]], make_policy("lyapunov"), slot=1.0, estimator=P100).run()
    assert res.gpus[3] == alone.gpus[0] > 1
    never = Simulator(ONE_HOST, jobs, SluicePolicy(wait_for_gpus=False, preempt=False),
                      slot=1.0, estimator=P100).run()
    assert never.gpus[3] == 1 and res.jct[3] < never.jct[3]


def test_estimate_error_is_seeded_and_changes_only_the_view():
    jobs = [job(f"j{i}", arrival=i * 5.0, m=5000 * (i % 3 + 1)) for i in range(8)]
    runs = [Simulator(ONE_HOST, jobs, make_policy("sluice", estimate_error=1.0, seed=s),
                      slot=1.0, estimator=P100, network=False).run() for s in (3, 3, 4)]
    assert runs[0].jct == runs[1].jct
    exact = Simulator(ONE_HOST, jobs, make_policy("sluice"), slot=1.0, estimator=P100, network=False).run()
    # the work done is the true work: GPU-seconds match whatever the view
    assert all(r.jobs == exact.jobs for r in runs)
    with pytest.raises(ValueError):
        SluicePolicy(estimate_error=-1)
