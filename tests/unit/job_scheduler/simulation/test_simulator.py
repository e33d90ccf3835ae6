"""The discrete-event engine: timing, uplink sharing, metrics, scale, and a check of the
engine against the Tiresias simulator's published figures."""

from __future__ import annotations

import math

import pytest

from sluice_common.jobspec import JobSpec
from sluice_common.placement import Placement
from job_scheduler.core.policies import make_policy
from job_scheduler.simulation.simulator import Simulator, simulate
from job_scheduler.simulation.workloads import SHARED_WORKLOADS, load_workload
from topologies import load_topology
from support.paths import REPO
from support.sim_jobs import CROSS_A, CROSS_B, Pinned, job

TWO_RACK = load_topology("two-rack")
WORKLOADS = SHARED_WORKLOADS
if not WORKLOADS.exists():
    WORKLOADS = REPO.parent / "shared" / "workloads"


def test_lone_job_runs_for_C_n_of_its_placement():
    jobs = [job("a")]
    sim = Simulator(TWO_RACK, jobs, Pinned({"a": CROSS_A}), slot=1.0)
    res = sim.run()
    model = sim.models[0]
    # effective bandwidth: 4 flows through a 5,000 Mbit/s uplink -> 1,250 each
    assert sim.base_bandwidth(CROSS_A) == pytest.approx(1250.0)
    assert res.avg_jct == pytest.approx(model.C(4, 1250.0))
    assert res.gpu_util == pytest.approx(4 / 16)
    assert res.avg_wait == 0.0


def test_jobs_sharing_an_uplink_slow_down_and_speed_up_again():
    alone = Simulator(TWO_RACK, [job("a")], Pinned({"a": CROSS_A}), slot=1.0).run().avg_jct
    both = Simulator(TWO_RACK, [job("a"), job("b")], Pinned({"a": CROSS_A, "b": CROSS_B}),
                     slot=1.0)
    res = both.run()
    model = both.models[0]
    # 8 flows share each 5,000 Mbit/s uplink: 625 each, both jobs run at C(4, 625)
    assert res.jct == pytest.approx([model.C(4, 625.0)] * 2)
    assert res.avg_jct > alone * 1.2
    # b arrives when a is 40 % done: a runs shared until b ... and alone again after
    t_b = 0.4 * alone
    later = Simulator(TWO_RACK, [job("a"), job("b", arrival=t_b)],
                      Pinned({"a": CROSS_A, "b": CROSS_B}), slot=1.0)
    r = later.run()
    c_alone, c_shared = model.C(4, 1250.0), model.C(4, 625.0)
    start_b = math.ceil(t_b)
    done_a_at_b = start_b / c_alone
    finish_a = start_b + (1 - done_a_at_b) * c_shared
    assert r.jct[0] == pytest.approx(finish_a, rel=1e-9)
    # b: shared until a finishes, then alone
    done_b = (finish_a - start_b) / c_shared
    finish_b = finish_a + (1 - done_b) * c_alone
    assert r.jct[1] == pytest.approx(finish_b - t_b, rel=1e-9)


def test_same_host_jobs_pay_the_host_bus_not_the_network():
    pinned = {"a": Placement("a", ("h1",), ("h1",) * 4)}
    sim = Simulator(TWO_RACK, [job("a")], Pinned(pinned))
    res = sim.run()
    # 4 PS<->worker flows share h1's 100 Gbit/s bus: 25 Gbit/s each, no fabric link
    assert res.avg_jct == pytest.approx(sim.models[0].C(4, 25_000.0))
    assert res.avg_jct > sim.models[0].cost(4)
    free = Simulator(TWO_RACK, [job("a")], Pinned(pinned), in_host=False)
    assert free.run().avg_jct == pytest.approx(free.models[0].cost(4))


def test_jobs_wait_for_slot_boundaries_and_wait_is_counted():
    jobs = [job("a", arrival=3.2, max_gpus=1)]
    res = simulate(TWO_RACK, jobs, make_policy("single"), slot=10.0)
    assert res.avg_wait == pytest.approx(10.0 - 3.2)


def test_no_network_reproduces_the_tiresias_simulator_figures():
    """With communication switched off (the Tiresias simulator's assumption) the engine
    gives the published figures for the 60-job trace on 2 racks x 2 nodes x 4 GPUs:
    FIFO 215.9 s / makespan 3,335 s and 2D-LAS 190.7 s (their placement differs from
    ours, hence the tolerance)."""
    jobs = load_workload(WORKLOADS / "tiresias_60_job.csv", trace_format="tiresias")
    fifo = simulate(TWO_RACK, jobs, make_policy("fifo"), slot=1.0, network=False)
    las = simulate(TWO_RACK, jobs, make_policy("las"), slot=1.0, network=False)
    assert fifo.makespan == pytest.approx(3335, rel=0.02)
    assert fifo.avg_jct == pytest.approx(215.9, rel=0.10)
    assert las.avg_jct == pytest.approx(190.7, rel=0.05)
    assert las.avg_jct < fifo.avg_jct


def test_trace_jobs_alone_reproduce_their_trace_duration():
    jobs = load_workload(WORKLOADS / "tiresias_60_job.csv", trace_format="tiresias")
    for spec in jobs[:12]:
        alone = JobSpec(**{**spec.__dict__, "arrival": 0.0})
        res = simulate(TWO_RACK, [alone], make_policy("las"), slot=1.0)
        assert res.avg_jct == pytest.approx(spec.trace_duration, rel=1e-6), spec.name


def test_philly_slice_on_cluster_2k_completes_every_job():
    topo = load_topology("cluster-2k")
    jobs = load_workload(WORKLOADS / "philly.csv", trace_format="philly", jobs=1500)
    res = simulate(topo, jobs, make_policy("lyapunov"), slot=60.0)
    assert res.jobs == 1500
    assert all(math.isfinite(x) and x > 0 for x in res.jct)
    assert 0 < res.gpu_util <= 1


def test_a_policy_that_never_starts_anything_is_reported_not_looped():
    class Never(Pinned):
        def wants_slot(self, sim):
            return True

        def step(self, sim):
            pass

    sim = Simulator(TWO_RACK, [job("a")], Never({}), slot=1.0)
    sim.max_stalled_slots = 50
    with pytest.raises(RuntimeError, match="waiting on an idle cluster"):
        sim.run()


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from job_scheduler.core.policies import POLICY_NAMES  # noqa: E402

_job_st = st.tuples(st.sampled_from(["resnet18", "vgg16", "alexnet", "googlenet"]),
                    st.integers(1000, 40000), st.sampled_from([1, 2, 4, 8, 12]),
                    st.floats(0, 2000))


@settings(max_examples=15, deadline=None)
@given(specs=st.lists(_job_st, min_size=1, max_size=10), policy=st.sampled_from(POLICY_NAMES),
       slot=st.sampled_from([1.0, 10.0, 60.0]))
def test_any_workload_any_policy_invariants(specs, policy, slot):
    jobs = [job(f"j{i}", arrival=a, max_gpus=g, model=m, m=size)
            for i, (m, size, g, a) in enumerate(specs)]
    sim = Simulator(TWO_RACK, jobs, make_policy(policy, seed=1), slot=slot)
    res = sim.run()
    assert res.jobs == len(jobs)
    assert 0 < res.gpu_util <= 1 + 1e-9
    assert sim.state.total_free == TWO_RACK.total_gpus        # everything released
    for k, spec in enumerate(sim.jobs):
        wait = sim.first_start[k] - spec.arrival
        start = sim.first_start[k]
        assert 0 <= wait and abs(round(start / slot) * slot - start) < 1e-6   # on a slot
        # sharing and preemption only ever slow a job down
        assert res.jct[k] >= wait + sim.models[k].cost(res.gpus[k]) * (1 - 1e-9)


def test_uplink_priority_serves_the_shorter_job_first_and_conserves_the_link():
    """--priority remaining: the smaller job's flows take the uplink first; the larger
    one gets what the smaller leaves (its compute gaps) and is slowed, not stopped."""
    jobs = [job("a", m=80000), job("b", m=10000)]
    pins = Pinned({"a": CROSS_A, "b": CROSS_B})
    off = Simulator(TWO_RACK, jobs, pins, slot=1.0).run()
    on = Simulator(TWO_RACK, jobs, pins, slot=1.0, priority="remaining")
    res = on.run()
    c_alone = on.models[1].C(4, 1250.0)
    # b (the shorter) runs as if alone: its rule level is 0, nobody above it
    assert res.jct[1] == pytest.approx(c_alone, rel=1e-6)
    assert res.jct[1] < off.jct[1]
    # a: slower than alone while b runs, faster than under fair sharing... and the mean wins
    a_alone = Simulator(TWO_RACK, jobs[:1], pins, slot=1.0).run().jct[0]
    assert a_alone < res.jct[0]
    assert res.avg_jct < off.avg_jct
    # attained: both start with 0 bytes (one level) -> the fair share, as priority off
    same = Simulator(TWO_RACK, jobs, pins, slot=1.0, priority="attained").run()
    assert same.jct[1] == pytest.approx(off.jct[1], rel=0.05)
    with pytest.raises(ValueError, match="priority"):
        Simulator(TWO_RACK, jobs, pins, priority="shortest")


def test_attained_at_explicit_thresholds_ranks_as_pias_hosts_tag():
    """PIAS's thresholds: a job is demoted once its connection's bytes pass the first; a
    threshold above every job's bytes keeps them in one level (the fair share)."""
    jobs = [job("a", m=80000), job("b", m=10000)]
    pins = Pinned({"a": CROSS_A, "b": CROSS_B})
    off = Simulator(TWO_RACK, jobs, pins, slot=1.0).run()
    never = Simulator(TWO_RACK, jobs, pins, slot=1.0, priority="attained",
                      attained_thresholds=(1e30,)).run()
    assert never.jct == pytest.approx(off.jct, rel=1e-9)
    # b arrives after a has sent bytes: a byte's threshold has demoted a, b goes first
    late = [job("a", m=80000), job("b", arrival=5.0, m=10000)]
    fair = Simulator(TWO_RACK, late, pins, slot=1.0).run()
    low = Simulator(TWO_RACK, late, pins, slot=1.0, priority="attained",
                    attained_thresholds=(1.0,)).run()
    assert low.jct[1] < 0.75 * fair.jct[1]
    for bad in ({"priority": "remaining", "attained_thresholds": (1.0,)},
                {"priority": "attained", "attained_thresholds": (2.0, 1.0)},
                {"priority": "attained", "attained_thresholds": tuple(range(1, 20))}):
        with pytest.raises(ValueError, match="attained_thresholds"):
            Simulator(TWO_RACK, jobs, pins, **bad)


def test_simulate_cli_priority_option_changes_the_world_not_the_decisions(capsys):
    import json

    from sluice.cli import main

    args = ["simulate", "--workload", "end_to_end/data/demo_jobs.yaml", "--topology",
            "two-rack-100g", "--policies", "lyapunov", "--slot", "1", "--json"]
    assert main(args) == 0
    off = json.loads(capsys.readouterr().out)
    assert main(args + ["--priority", "remaining"]) == 0
    on = json.loads(capsys.readouterr().out)
    assert "priority" not in off and on["priority"] == "remaining"
    assert on["policies"]["lyapunov"]["avg_jct"] <= off["policies"]["lyapunov"]["avg_jct"]
    with pytest.raises(SystemExit) as err:
        main(args + ["--priority", "fastest"])
    assert err.value.code == 2
