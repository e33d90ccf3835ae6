"""Preemption and migration of real PS jobs in the run loop (end_to_end.runloop carrying
out the Suspends of the slot plan), without a fabric: the topology's hosts are loopback
addresses (127.0.1.x), so real ps-lite processes run on this machine under the real
loop; the run's LAS decision (the simulator's LasPolicy on the run's view) and the
report section are checked without processes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from job_scheduler.core.estimator import Estimator
from sluice_common.jobspec import JobSpec
from job_scheduler.core.decisions import StartDecision, Suspend, decide_slot
from job_scheduler.core.mechanisms import Migration
from job_scheduler.core.policies import make_policy
from job_scheduler.core.preemption import CostRow, PreemptionCosts
from ps_runtime.plan import BLOCK
from ps_runtime.runners import LocalRunner
from ps_runtime.worker_overrides import WorkerOverrides
from end_to_end.preemption_report import preemption_lines
from job_scheduler.core.live_view import LiveView
from sluice_common.placement import Placement
from end_to_end.runloop import RealTimeRun
from end_to_end.run_options import RunOptions
from topologies import load_topology
from end_to_end.result import iterations_of

EMULATED = {"*": WorkerOverrides(compute_s=0.03, bytes_per_batch=4096)}


class NoController:
    def links(self):
        return {"ports": []}


def loopback_topology(tmp_path: Path, gpus: tuple[int, int]):
    """Two racks of one host each, at loopback addresses the processes can bind."""
    doc = {"name": "lo-two-rack",
           "switches": [{"name": "t1", "role": "tor"}, {"name": "t2", "role": "tor"},
                        {"name": "s1", "role": "spine"}],
           "racks": [{"name": "r1", "tor": "t1"}, {"name": "r2", "tor": "t2"}],
           "hosts": [{"name": "h1", "rack": "r1", "gpus": gpus[0], "bw": 10000, "ip": "127.0.1.1"},
                     {"name": "h2", "rack": "r2", "gpus": gpus[1], "bw": 10000, "ip": "127.0.1.2"}],
           "links": [{"a": "t1", "b": "s1", "bw": 100}, {"a": "t2", "b": "s1", "bw": 100}]}
    path = tmp_path / "topo.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_topology(str(path))


PORTS = 20 * BLOCK      # ps-lite ports for every launch of a test (relaunches included)


def _run(tmp_path, topology, jobs, policy, port_base, **kw):
    options = RunOptions(priority=False, slot_s=0.5, compute="emulated",
                         worker_overrides=EMULATED, job_timeout_s=240, port_base=port_base)
    loop = RealTimeRun(topology, jobs, policy, Estimator(), None, NoController(),
                       tmp_path / "run", options, policy_name="test", runner=LocalRunner(), **kw)
    return loop.run()


def _batches_done(job: dict) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for it in iterations_of(job):
        out.setdefault(it.worker, []).append(it.batch)
    return out


# ---- pure ------------------------------------------------------------------------------

def test_las_in_the_run_suspends_a_running_job_that_a_less_served_one_outranks(tmp_path):
    """The run's view, driven by the simulator's LasPolicy through decide_slot: once the
    running job has attained 20 GPU-s (counted from its first batch) the new one
    outranks it; the plan suspends it and starts the new job on its GPUs. Below the
    threshold (FIFO inside a queue) it keeps them, and with room for both nobody is
    suspended."""
    jobs = [JobSpec(name="old", model="resnet18", dataset_size=6400, epochs=1, batch_size=32,
                    max_gpus=2), JobSpec(name="new", model="resnet18", dataset_size=640,
                                         epochs=1, batch_size=32, max_gpus=1, arrival=5.0)]

    def plans(attained_at: float, gpus: tuple[int, int], trained: bool = True):
        view = LiveView(loopback_topology(tmp_path, gpus), Estimator(), 1.0)
        las = make_policy("las", las_thresholds=(20.0,))
        view.add(0, jobs[0])
        las.on_arrival(view, 0)
        first = decide_slot(view, las)            # old starts on both GPUs at t = 0
        if trained:                               # its first batch at t = 0 (the run says)
            view.running[0].t_last = 0.0
            las.on_training(view, 0, 0.0)
        view.now = attained_at
        view.add(1, jobs[1])
        las.on_arrival(view, 1)
        return first, decide_slot(view, las)

    first, plan = plans(11.0, (1, 1))             # 2 GPUs x 11 s = 22 GPU-s > 20
    assert [type(s) for s in first.steps] == [StartDecision]
    assert plan.suspends == [Suspend(0, 0.0, "policy")]
    assert [(d.job_id, d.worker_hosts) for d in plan.starts] == [(1, ("h1",))]
    assert not plans(9.0, (1, 1))[1].steps             # 18 GPU-s: the running job keeps them
    # start-up is not attained service: a job that has not trained a batch keeps them
    assert not plans(11.0, (1, 1), trained=False)[1].steps
    _, roomy = plans(11.0, (2, 1))
    assert not roomy.suspends and [d.job_id for d in roomy.starts] == [1]


def test_report_lists_each_preemption():
    result = {"summary": {"preemptions": 1, "migrations": 0},
              "preemptions": [{"job": "a", "why": "las", "t": 3.0, "batch": 7, "batches": 40,
                               "suspend_s": 0.8, "resume_s": 1.5, "interruption_s": 2.3,
                               "from_hosts": ["h1", "h2"]}]}
    text = "\n".join(preemption_lines(result))
    assert "| 3.0 | a | las | 7/40 | 0.80 | 1.50 | 2.30 | h1,h2 | - |" in text


# ---- real jobs ---------------------------------------------------------------------------

@pytest.mark.slow
def test_las_run_with_more_demand_than_gpus_preempts_and_finishes_every_job(tmp_path,
                                                                            free_port_base):
    """Two GPUs; a 2-GPU job runs past the threshold, then a 1-GPU job arrives and
    outranks it: the first is suspended at a batch boundary, the second runs, the first
    resumes from its checkpoint and finishes every batch exactly once."""
    topo = loopback_topology(tmp_path, (1, 1))
    jobs = [JobSpec(name="long", model="resnet18", dataset_size=2 * 4 * 150, epochs=1,
                    batch_size=4, max_gpus=2, arrival=0.0),
            JobSpec(name="short", model="resnet18", dataset_size=4 * 40, epochs=1,
                    batch_size=4, max_gpus=1, arrival=6.0)]
    # GPU-s from each run's first batch (start-up is not attained service, on_training):
    # long crosses it, short never does
    las = make_policy("las", las_thresholds=(4.0,))
    result = _run(tmp_path, topo, jobs, las, can_suspend=True, port_base=free_port_base(PORTS))
    by = {j["name"]: j for j in result["jobs"]}
    assert result["summary"]["finished"] == 2, result["jobs"]
    pre = result["preemptions"]
    assert [p["job"] for p in pre] == ["long"] and pre[0]["why"] == "las"
    assert result["summary"]["preemptions"] == 1
    assert 0 < pre[0]["batch"] < 150 and pre[0]["suspend_s"] > 0 and pre[0]["resume_s"] > 0
    # every batch of the preempted job ran exactly once, on both workers
    assert _batches_done(by["long"]) == {0: list(range(1, 151)), 1: list(range(1, 151))}
    assert _batches_done(by["short"]) == {0: list(range(1, 41))}
    assert by["long"]["preemptions"] == 1
    # the short job ran while the long one was suspended
    assert by["short"]["finish"] < by["long"]["finish"]
    assert "## Preemptions and migrations" in "\n".join(preemption_lines(result))


@pytest.mark.slow
def test_a_cross_rack_job_migrates_when_its_rack_frees_up(tmp_path, free_port_base):
    """A fixed first placement puts 'moved' across the racks; once 'filler' ends, two
    GPUs on h2 are free and the estimator says one host beats staying: it is suspended
    and resumed there, and still runs every batch once."""
    topo = loopback_topology(tmp_path, (1, 3))
    jobs = [JobSpec(name="filler", model="resnet18", dataset_size=4 * 20, epochs=1,
                    batch_size=4, max_gpus=2, arrival=0.0),
            JobSpec(name="moved", model="vgg16", dataset_size=2 * 4 * 400, epochs=1,
                    batch_size=4, max_gpus=2, arrival=0.0)]
    fixed = {"filler": (("h2",), ("h2", "h2")), "moved": (("h1",), ("h1", "h2"))}

    def policy(queued, state, now):
        return [StartDecision(q.id, Placement(q.spec.name, *fixed[q.spec.name])) for q in queued]

    costs = PreemptionCosts([CostRow("vgg16", "emulated", 2, 1.0, 2.0)])
    result = _run(tmp_path, topo, jobs, policy, mechanisms=(Migration(),), costs=costs,
                  port_base=free_port_base(PORTS))
    assert result["summary"]["finished"] == 2, result["jobs"]
    mig = [p for p in result["preemptions"] if p["why"] == "migrate"]
    assert len(mig) == 1 and result["summary"]["migrations"] == 1
    assert mig[0]["from_hosts"] == ["h1", "h2"] and mig[0]["to_hosts"] == ["h2"]
    moved = {j["name"]: j for j in result["jobs"]}["moved"]
    assert _batches_done(moved) == {0: list(range(1, 401)), 1: list(range(1, 401))}


def test_every_slot_on_the_grid_is_a_step_or_an_idle_one_as_in_the_dry_run(tmp_path,
                                                                         free_port_base):
    """The live loop's slots fall on the grid k x slot and a job joins the queue at the
    first slot at or after its arrival, as the simulator's; a slot with nothing waiting
    or running is an idle one for the policy (the lyapunov policy's Z decays in it, as
    in the dry run), so the live decisions follow the dry run's."""
    topo = loopback_topology(tmp_path, (2, 2))
    jobs = [JobSpec(name="first", model="resnet18", dataset_size=32 * 3, epochs=1,
                    batch_size=32, max_gpus=1),
            JobSpec(name="later", model="resnet18", dataset_size=32 * 3, epochs=1,
                    batch_size=32, max_gpus=1, arrival=12.2)]
    policy = make_policy("fifo")
    loop = RealTimeRun(topo, jobs, policy, Estimator(), None, NoController(), tmp_path / "run",
                       RunOptions(priority=False, slot_s=0.5, compute="emulated",
                                  worker_overrides=EMULATED, job_timeout_s=240,
                                  port_base=free_port_base(PORTS)),
                       policy_name="test", runner=LocalRunner())
    # the loop's events in the order they happened: a slot's time is its grid point, and a
    # loop that falls behind handles it late and catches up, so the order of the slots,
    # the arrivals and the ends is checked, not the clock at which they were handled
    events: list[tuple[str, float]] = []
    policy.idle = lambda view, slots: events.append(("idle", loop.now()))
    arrive, ended = loop.admit, loop.ended

    def noting_arrival(j, spec):
        events.append((f"arrive {spec.name}", loop.now()))
        return arrive(j, spec)

    def noting_end(e):
        events.append((f"end {loop.view.jobs[e.job_id].name}", loop.now()))
        return ended(e)

    loop.admit, loop.ended = noting_arrival, noting_end
    result = loop.run()
    starts = {j["name"]: j["start"] for j in result["jobs"]}
    finishes = {j["name"]: j["finish"] for j in result["jobs"]}
    assert all(j["status"] == "finished" for j in result["jobs"])
    # "later" arrives at 12.2 s (time for "first" to end on a loaded machine): it joins at
    # the 12.5 s slot, not before
    assert 12.5 <= starts["later"] < 13.5, starts
    kinds = [kind for kind, _ in events]
    assert kinds.index("end first") < kinds.index("arrive later") < kinds.index("end later")
    between = events[kinds.index("end first"):kinds.index("arrive later")]
    idle_at = [t for kind, t in between if kind == "idle"]
    # every slot from the first job's end until the later one joined was an idle one, and
    # none while the later one was queued or running (a slot handled in the loop's last
    # turn, after the later job's end, may be idle too: nothing is left to decide)
    while_first_ran = kinds[:kinds.index("end first")]
    while_later_queued_or_ran = kinds[kinds.index("arrive later"):kinds.index("end later")]
    assert idle_at and "idle" not in while_first_ran + while_later_queued_or_ran
    assert max(idle_at) >= 12.0          # the 12.0 s slot was idle: no slot fires early
    # one idle slot per grid point from the first job's end to 12.0 s: a late loop catches
    # up on the grid and skips none (the slots around the end fall either side of it by
    # when the loop polls the job's exit)
    grid_points_idle = int((12.0 - finishes["first"]) // 0.5) + 1
    assert grid_points_idle - 1 <= len(idle_at) <= grid_points_idle + 2, (len(idle_at), finishes)
