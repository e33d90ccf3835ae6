"""One scheduling-loop contract (job_scheduler/core/decisions.py): the simulator and the
scheduler service (simulated executor, a fake clock ticking once per slot) drive the same
policy objects and, with the same bandwidth model, job file, seed and slot, take the same
decisions: start times, GPU counts, placements and the GPU indices of each host."""

from __future__ import annotations

import math

import pytest
import yaml

from job_scheduler.core.decisions import SchedulingContext, Suspend
from job_scheduler.core.estimator import Estimator
from job_scheduler.service.executors import SimulatedExecutor
from job_scheduler.core.policies import make_policy as make_sim_policy
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.core.estimator import effective_bandwidth
from job_scheduler.core.job_model import JobModel
from job_scheduler.core.live_view import LiveView
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.simulation.simulator import Simulator
from job_scheduler.service.store import JobStore
from sluice_common.jobspec import job_to_dict, load_jobs, parse_jobs_text
from topologies import load_topology, parse_topology

from support.paths import REPO as ROOT
JOBS = load_jobs(ROOT / "examples" / "jobs" / "mixed.yaml")
TOPO = load_topology("two-rack")
EST = Estimator()
SLOT = 1.0


def simulator_decisions(policy: str, seed: int) -> dict[str, tuple]:
    ids = {}
    sim = Simulator(TOPO, JOBS, make_sim_policy(policy, seed=seed), estimator=EST, slot=SLOT,
                    bandwidth="idle", on_plan=lambda t, plan: ids.update(
                        {d.job_id: d.gpu_ids.as_dict() for d in plan.starts}))
    sim.run()
    assert isinstance(sim, SchedulingContext)
    return {job.name: (sim.first_start[j], sim.placements[j].gpus,
                       sim.placements[j].ps_hosts, sim.placements[j].worker_hosts, ids[j])
            for j, job in enumerate(sim.jobs)}


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def service_decisions(tmp_path, policy: str, seed: int) -> dict[str, tuple]:
    """The service, slot by slot: every job is submitted at t = 0 and the service holds
    it back until its arrival (``not_before``); it runs C(n) at the idle-fabric
    bandwidth of its placement."""
    def bandwidth(p):                  # the idle fabric
        return effective_bandwidth(TOPO, p.ps_hosts, p.worker_hosts)
    executor = SimulatedExecutor(lambda spec, d: EST.C(spec, d.gpus, bandwidth(d.placement)))
    clock = Clock()
    svc = SchedulerService(JobStore(tmp_path / f"{policy}.db"), TOPO,
                           make_policy_step(policy, TOPO, EST, slot=SLOT, seed=seed),
                           {"simulated": executor}, "simulated", clock=clock)
    svc.submit(yaml.safe_dump({"jobs": [job_to_dict(j) for j in JOBS]}), "test")
    for _ in range(100_000):
        svc.tick()
        records = svc.store.jobs()
        if records and all(r.state == "finished" for r in records):
            break
        clock.t += SLOT
    else:
        raise AssertionError("the service did not finish the jobs")
    return {r.name: (r.started_at, r.gpus, tuple(r.placement["ps_hosts"]),
                     tuple(r.placement["worker_hosts"]), r.placement["gpu_ids"])
            for r in svc.store.jobs()}


@pytest.mark.parametrize("policy", ["lyapunov", "fifo", "tetris", "random"])
def test_simulator_and_service_take_the_same_decisions(tmp_path, policy):
    sim = simulator_decisions(policy, seed=3)
    svc = service_decisions(tmp_path, policy, seed=3)
    assert sorted(sim) == sorted(j.name for j in JOBS)
    assert svc == sim
    # not a trivial agreement: several GPU counts and hosts, and indices other than the first
    assert len({d[1] for d in sim.values()}) > 1 and len({d[3] for d in sim.values()}) > 1
    if policy == "lyapunov":     # two jobs on one host: the second gets indices past 0
        assert any(min(ids) > 0 for d in sim.values() for ids in d[4].values())


def test_the_policies_decide_differently_so_the_agreement_says_something():
    lyapunov, fifo = simulator_decisions("lyapunov", 3), simulator_decisions("fifo", 3)
    assert lyapunov != fifo
    assert any(lyapunov[j.name][0] > j.arrival for j in JOBS)     # Proteus made jobs wait


def test_the_bandwidth_model_is_declared_and_used():
    """"shared" caps a cross-rack placement by its share of the busy uplinks; "idle"
    gives it the fabric alone (the service's model)."""
    from sluice_common.placement import Placement
    cross = Placement("x", ("h1",), ("h1", "h3"))
    sims = {m: Simulator(TOPO, JOBS, make_sim_policy("fifo"), estimator=EST, bandwidth=m)
            for m in ("shared", "idle")}
    for sim in sims.values():
        sim.uplink_flows = [1000] * len(sim.uplink_flows)        # busy rack uplinks
    shared, idle = (sims[m].live_bandwidth(cross) for m in ("shared", "idle"))
    assert idle == LiveView(TOPO, EST, SLOT).live_bandwidth(cross) and math.isfinite(idle)
    assert shared < idle
    with pytest.raises(ValueError, match="bandwidth model"):
        Simulator(TOPO, JOBS, make_sim_policy("fifo"), bandwidth="measured-by-magic")


def test_the_service_view_is_a_scheduling_context():
    from job_scheduler.core.cluster_state import ClusterState
    view = LiveView(TOPO, EST, SLOT)
    view.state = ClusterState(TOPO)
    assert isinstance(view, SchedulingContext) and view.slot == SLOT


# ---- the preemptive policies: suspends included -----------------------------------------

DEMO = (load_jobs(ROOT / "end_to_end" / "data" / "demo_jobs.yaml"), load_topology("two-rack-100g"))


def _tiresias_20():
    from job_scheduler.simulation.workloads import SHARED_WORKLOADS, load_workload
    path = SHARED_WORKLOADS / "tiresias_60_job.csv"
    if not path.exists():
        path = ROOT.parent / "shared" / "workloads" / "tiresias_60_job.csv"
    # as a job file gives them to the service: the trace's GPU count as max_gpus, its
    # duration as the job's size (the file format has no trace fields)
    trace = load_workload(path, trace_format="tiresias", jobs=20)
    return parse_jobs_text(yaml.safe_dump({"jobs": [job_to_dict(j) for j in trace]}),
                           "tiresias-20"), TOPO, EST


def simulator_plans(jobs, topo, est, policy: str, seed: int, **options) -> list[tuple]:
    """Every step the simulator takes: (t, start|suspend, job, GPUs, PS hosts, worker
    hosts, GPU indices) in the order taken."""
    steps: list[tuple] = []
    sim = Simulator(topo, jobs, make_sim_policy(policy, seed=seed, **options), estimator=est,
                    slot=SLOT, bandwidth="idle", on_plan=lambda t, plan: steps.extend(
                        _step(t, s, sim.jobs[s.job_id].name) for s in plan.steps))
    sim.run()
    return steps


def _step(t, s, name) -> tuple:
    if isinstance(s, Suspend):
        return (t, "suspend", name, s.why, round(s.cost_s, 9))
    return (t, "start", name, s.gpus, s.ps_hosts, s.worker_hosts, s.gpu_ids.as_dict())


def service_plans(tmp_path, jobs, topo, est, policy: str, seed: int, **options):
    """The service, slot by slot (as ``service_decisions``), its policy's steps as the
    service carried them out; and its store at the end."""
    reference = LiveView(topo, est, SLOT)

    def duration(spec, d):         # the job's C(n) on its idle-fabric placement, as priced
        model = JobModel(spec, est, reference.reference_bandwidth)    # by the simulator
        bw = effective_bandwidth(topo, d.ps_hosts, d.worker_hosts, bus=est.bus_mbps)
        return model.C(d.gpus, bw, reference.exchange_path(d))
    clock = Clock()
    svc = SchedulerService(JobStore(tmp_path / f"{policy}.db"), topo,
                           make_policy_step(policy, topo, est, slot=SLOT, seed=seed, **options),
                           {"simulated": SimulatedExecutor(duration)}, "simulated", clock=clock)
    svc.submit(yaml.safe_dump({"jobs": [job_to_dict(j) for j in jobs]}), "test")
    names = {r.id: r.name for r in svc.store.jobs()}
    steps: list[tuple] = []
    decide = svc.policy.decide

    def recording(state, now, **progress):
        out = decide(state, now, **progress)
        steps.extend(_step(now, s, names[s.job_id]) for s in out)
        return out
    svc.policy.decide = recording
    while not all(r.state == "finished" for r in svc.store.jobs()):
        assert clock.t < 100_000, "the service did not finish the jobs"
        svc.tick()
        clock.t += SLOT
    return steps, svc.store


def _contended(emulated: bool = False):
    """Two GPUs and more work than they hold: both policies suspend running jobs.
    ``emulated``: priced as on the emulated fabric (in-host exchange over the loopback,
    as run_estimator prices), where long1 is suspended for short1 and long2 while it
    waits for both GPUs: the sluice policy once suspended long2 again every other slot
    in the service (slots the simulator skips) for a long1 that still waited."""
    from support.sim_jobs import CONTENDED, TWO_GPUS
    from job_scheduler.core.exchange_pricing import ExchangePricing
    topo = parse_topology(yaml.safe_load(TWO_GPUS))
    est = Estimator(exchange=ExchangePricing.for_topology(topo, emulated=emulated))
    return parse_jobs_text(CONTENDED, "contended"), topo, est


WORKLOADS = {"demo": lambda: (*DEMO, EST), "tiresias-20": _tiresias_20, "contended": _contended,
             "contended-loopback": lambda: _contended(emulated=True)}
# where a policy must suspend (else the agreement would not show that suspends agree)
MUST_SUSPEND = {("las", "tiresias-20"), ("las", "contended"), ("sluice", "contended"),
                ("sluice", "contended-loopback")}


@pytest.mark.parametrize("policy", ["las", "sluice"])
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_preemptive_policies_decide_in_the_service_as_in_the_simulator(tmp_path, policy,
                                                                        workload):
    """Service and simulator: the same steps at the same slots, suspends included; the
    store carried every suspend out (one 'suspended' event each, then a resume)."""
    jobs, topo, est = WORKLOADS[workload]()
    # the contended jobs are short next to las' default threshold (3,600 GPU-seconds)
    options = {"las_thresholds": (20.0,)} if workload.startswith("contended") else {}
    sim = simulator_plans(jobs, topo, est, policy, seed=3, **options)
    svc, store = service_plans(tmp_path, jobs, topo, est, policy, seed=3, **options)
    assert svc == sim
    assert {s[2] for s in sim if s[1] == "start"} == {j.name for j in jobs}
    suspends = [s for s in sim if s[1] == "suspend"]
    events = [e for r in store.jobs() for e in store.events(r.id)]
    assert len([e for e in events if e[1] == "suspended"]) == len(suspends)
    assert len([e for e in events if e[1] in ("resumed", "migrated")]) == len(suspends)
    assert all(r.state == "finished" for r in store.jobs())
    if (policy, workload) in MUST_SUSPEND:
        assert suspends, f"{policy} suspended nothing on {workload}"


@pytest.mark.parametrize("workload", ["demo", "tiresias-20"])
def test_sluice_pricing_with_priority_decides_in_the_service_as_in_the_simulator(
        tmp_path, workload):
    """``price_priority``: the service's view and the simulator price a
    placement with the same running jobs on the uplinks, so they take the same steps."""
    jobs, topo, est = WORKLOADS[workload]()
    sim = simulator_plans(jobs, topo, est, "sluice", seed=3, price_priority="remaining")
    svc, _ = service_plans(tmp_path, jobs, topo, est, "sluice", seed=3,
                           price_priority="remaining")
    assert svc == sim
    assert {s[2] for s in sim if s[1] == "start"} == {j.name for j in jobs}
