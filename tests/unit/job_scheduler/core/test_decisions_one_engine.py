"""One loop body, several drivers: ``decisions.decide_slot`` makes the decisions of
the simulator, the scheduler service's policy step and ``sluice run --dry-run`` (the
run's scheduling loop on a virtual clock, the exchange model timing the jobs).

For the same jobs and seed, ``sluice run --dry-run`` takes the steps (starts,
suspensions, placements) the simulator takes on the run's estimator with the idle-fabric
bandwidth model, in the same order, preemptions included, under ``las`` and ``sluice``;
only their times differ by how the two time the jobs. Both time a suspension alike
here: the dry run's checkpoint costs (its GPUs held while the state is written, the
state read back on resume: ``end_to_end.model_run``) are left out, since the simulator
frees a suspended job's GPUs at once and charges the job the cost its policy states. The service's policy step, shown
the same queue, decides the same starts as the simulator (the full service run of every
non-preemptive policy is tests/unit/job_scheduler/core/test_decisions.py)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from job_scheduler.core.decisions import QueuedJob, StartDecision
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.mechanisms import MechanismOptions
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.policies import make_policy
from job_scheduler.core.preemption import load_costs
from job_scheduler.service.policy_step import PolicyStep
from job_scheduler.simulation.simulator import Simulator
from sluice.cli import main as sluice_main
from sluice_common.jobspec import load_jobs
from topologies import load_topology

from support.paths import REPO as ROOT
from support.sim_jobs import CONTENDED, TWO_GPUS
MIXED = ROOT / "examples" / "jobs" / "mixed.yaml"
SEED = 3
# two GPUs and more work than they hold: las and sluice both suspend running jobs


@pytest.fixture
def files(tmp_path):
    (tmp_path / "topo.yaml").write_text(TWO_GPUS)
    (tmp_path / "jobs.yaml").write_text(CONTENDED)
    return tmp_path / "jobs.yaml", tmp_path / "topo.yaml"


def simulator_plans(files, policy: str, mech: MechanismOptions = MechanismOptions()) -> list[str]:
    """The simulator's plans as the dry run prints them: 'time  step' lines."""
    from end_to_end.run import run_estimator
    from ps_runtime.calibration import launch_and_close
    topo = load_topology(str(files[1]))
    lines: list[str] = []
    sim = Simulator(topo, load_jobs(files[0]),
                    make_policy(policy, seed=SEED, las_thresholds=(20.0,)),
                    estimator=run_estimator(topo, "emulated"),
                    slot=1.0, bandwidth="idle", mechanisms=mech.build(),
                    costs=load_costs(mech.costs), startup=True,
                    startup_alone_s=sum(launch_and_close("emulated")),
                    on_plan=lambda t, p: lines.extend(
                        f"{t:9.1f} s  {s}" for s in p.lines([j.name for j in sim.jobs])))
    sim.run()
    return lines


@pytest.fixture(autouse=True)
def no_checkpoint_costs(monkeypatch):
    """The dry run without the checkpoint's costs (module doc)."""
    import ps_runtime.calibration

    monkeypatch.setattr(ps_runtime.calibration, "checkpoint_costs", lambda: None)


def dry_run_plans(capsys, files, policy: str, *extra: str) -> list[str]:
    assert sluice_main(["run", str(files[0]), "--topology", str(files[1]), "--policy", policy,
                        "--seed", str(SEED), "--compute", "emulated", "--las-threshold", "20",
                        "--dry-run", *extra]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("sluice run --dry-run: 4 jobs on two-gpu")
    return out[1:]


def _steps(lines: list[str]) -> list[str]:
    return [line.split(" s  ", 1)[1] for line in lines]


def _times(lines: list[str]) -> list[float]:
    return [float(line.split(" s  ", 1)[0]) for line in lines]


@pytest.mark.parametrize("policy", ["las", "sluice"])
def test_dry_run_takes_the_simulators_steps_preemptions_included(capsys, files, policy):
    sim = simulator_plans(files, policy)
    dry = dry_run_plans(capsys, files, policy)
    assert _steps(dry) == _steps(sim)
    # the same slots, give or take the few seconds the two timings differ by
    assert all(abs(a - b) <= 5.0 for a, b in zip(_times(dry), _times(sim)))
    # not a trivial agreement: every job starts, and running jobs are suspended
    assert {line.split()[3].rstrip(":") for line in dry if " start " in line} == \
        {"long1", "long2", "short1", "short2"}
    assert any(re.search(r"suspend long1 \(policy", line) for line in dry), dry


def test_dry_run_with_the_mechanisms_time_slices_on_the_quantum(capsys, files):
    """Time-slicing in the dry run: a job is suspended a quantum (30 s) after it
    trains, counted from its first batch as in the live run (the simulator also holds
    its GPUs for the costs the policy is told: its quanta are further apart)."""
    dry = dry_run_plans(capsys, files, "fifo", "--time-slice", "30", "--pack", "--migrate")
    steps, times = _steps(dry), _times(dry)
    slices = [t for t, s in zip(times, steps) if "(time-slice" in s]
    assert len(slices) >= 4
    gaps = [b - a for a, b in zip(slices, slices[1:]) if b > a]
    assert gaps and all(30.0 <= g <= 33.0 for g in gaps), gaps
    assert {s.split()[1].rstrip(":") for s in steps if s.startswith("start")} == \
        {"long1", "long2", "short1", "short2"}


def test_dry_run_refuses_what_a_run_refuses(capsys, files):
    assert sluice_main(["run", str(files[0]), "--topology", str(files[1]), "--policy", "las",
                        "--pack", "--dry-run"]) == 2
    assert "las time-shares" in capsys.readouterr().err


@pytest.mark.parametrize("policy", ["lyapunov", "fifo", "tetris", "las"])
def test_the_service_step_decides_a_slot_as_the_simulator_does(policy):
    """Every job queued at t = 0 on an empty cluster: the simulator's first plan and the
    service's policy step (the same decide_slot on its slot view, asked once per slot)
    agree on the slot and on the starts and their placements."""
    jobs = [dataclasses.replace(j, arrival=0.0) for j in load_jobs(MIXED)]
    topo, est = load_topology("two-rack"), Estimator()
    plans = []
    Simulator(topo, jobs, make_policy(policy, seed=SEED), estimator=est, slot=1.0,
              bandwidth="idle", on_plan=lambda t, p: plans.append((t, p))).run()
    t_sim, first = plans[0]
    # the service's step itself
    step = PolicyStep(policy, topo, est, seed=SEED)
    for key, job in enumerate(jobs):
        step.add(QueuedJob(key, job, 0.0))
    t, decided = 0.0, []
    while not decided and t <= t_sim:
        decided = step.decide(ClusterState(topo), t)
        t += 1.0
    assert t - 1.0 == t_sim
    assert [(d.job_id, d.placement) for d in decided] == \
        [(d.job_id, d.placement) for d in first.starts]
    assert len(decided) >= 2 and all(isinstance(s, StartDecision) for s in first.steps)
