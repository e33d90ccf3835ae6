"""One scheduling-loop contract (job_scheduler/core/decisions.py): the simulator and the
scheduler service (simulated executor, a fake clock ticking once per slot) drive the same
policy objects and, with the same bandwidth model, job file, seed and slot, take the same
decisions: start times, GPU counts, placements and the GPU indices of each host."""

from __future__ import annotations

import math

import pytest
import yaml

from job_scheduler.core.decisions import SchedulingContext
from job_scheduler.core.estimator import Estimator
from job_scheduler.service.executors import SimulatedExecutor
from job_scheduler.core.policies import make_policy as make_sim_policy
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.core.estimator import effective_bandwidth
from job_scheduler.core.live_view import LiveView
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.simulation.simulator import Simulator
from job_scheduler.service.store import JobStore
from sluice_common.jobspec import job_to_dict, load_jobs
from topologies import load_topology

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
    from job_scheduler.core.placement import ClusterState
    view = LiveView(TOPO, EST, SLOT)
    view.state = ClusterState(TOPO)
    assert isinstance(view, SchedulingContext) and view.slot == SLOT
