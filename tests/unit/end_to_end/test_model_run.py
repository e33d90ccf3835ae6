"""The dry run (end_to_end.model_run): the run's scheduling loop on a virtual clock with
the exchange model as its executor. Its predictions are the exchange model's price of
its own schedule, its jobs start when the model's processes have exited, and a
suspended job runs again later."""

from __future__ import annotations

import math

import pytest

from end_to_end import run
from end_to_end.arms import ARMS
from end_to_end.demo_arms import arm_config, predictions, workload
from end_to_end.model_run import model_run
from end_to_end.predict import predict_pass
from end_to_end.workload_draw import DrawSpec
from ps_runtime.calibration import launch_and_close, server_per_worker_s
from sluice_common.jobspec import JobSpec
from topologies import load_topology

TOPO = load_topology("two-rack-100g")
BASE = run.RunConfig(jobs="x.yaml", topology="two-rack-100g", compute="emulated")


@pytest.mark.parametrize("arm", ["b", "d"])
def test_the_predictions_are_the_exchange_models_price_of_the_dry_runs_schedule(arm):
    """predict_pass on the dry run's own records (starts, stops, placements) gives the
    dry run's JCTs: one model, one schedule. Arm d (sluice + priority) suspends a job
    on this draw (tuning seed 1000), arm b (Slurm + priority) does not."""
    config = arm_config(BASE, ARMS[arm])
    jobs = workload(TOPO, config, 1000, DrawSpec(jobs=10)).jobs
    got = model_run(jobs, TOPO, config, run.run_estimator(TOPO, config.compute, config.profile))
    launch_s, close_s = launch_and_close("emulated")
    priced = predict_pass(TOPO, got.records, config.rank, launch_s, close_s=close_s,
                          server_per_worker_s=server_per_worker_s())
    assert set(got.jct) == set(priced) == {j.name for j in jobs}
    assert all(got.jct[n] == pytest.approx(priced[n], abs=1e-2) for n in priced)
    assert any(len(r["segments"]) > 1 for r in got.records) == (arm == "d")
    planned, predicted = predictions(TOPO, jobs, BASE, [ARMS[arm]])
    assert planned[arm] == got.records and predicted[arm] == got.jct


def test_a_job_waiting_for_gpus_starts_at_the_first_slot_after_the_others_exit():
    """Each job wants all 16 GPUs: the second launches at the first slot at or after the
    first's processes have exited (its last batch plus the runtime's close), as the live
    loop launches when the GPUs are back."""
    jobs = [JobSpec(name=n, model="resnet18", dataset_size=64000, epochs=1, batch_size=256,
                    max_gpus=16, arrival=0.0) for n in ("x", "y")]
    config = run.RunConfig(jobs="x.yaml", topology="two-rack-100g", compute="emulated",
                           policy="fifo", priority="off")
    got = model_run(jobs, TOPO, config, run.run_estimator(TOPO, config.compute, config.profile))
    first, second = got.records
    assert first["start"] == 0.0 and first["segments"][0]["stop"] is None
    exit_first = first["arrival"] + got.jct[first["name"]]
    assert second["start"] == pytest.approx(math.ceil(exit_first - 1e-6))
    assert got.jct[second["name"]] > got.jct[first["name"]]


def test_a_suspended_job_stops_and_resumes_later_with_its_work_left():
    config = arm_config(BASE, ARMS["d"])
    jobs = workload(TOPO, config, 1000, DrawSpec(jobs=10)).jobs
    got = model_run(jobs, TOPO, config, run.run_estimator(TOPO, config.compute, config.profile))
    suspended = [r for r in got.records if len(r["segments"]) > 1]
    assert suspended
    for r in suspended:
        segs = r["segments"]
        assert all(s["stop"] is not None and s["stop"] > s["start"] for s in segs[:-1])
        assert all(b["start"] >= a["stop"] for a, b in zip(segs, segs[1:]))
        assert segs[-1]["stop"] is None and r["name"] in got.jct


def test_a_packed_guest_is_timed_with_the_runs_compute_slowdown():
    """--pack on one GPU: the second job shares the first's GPU; the dry run slows its
    compute as the run's worker is slowed (PACK_SLOWDOWN), and its record says so, so
    the exchange model's price of the schedule is the dry run's."""
    from job_scheduler.core.mechanisms import PACK_SLOWDOWN, MechanismOptions
    from topologies import parse_topology

    topo = parse_topology({"name": "one-gpu", "switches": [{"name": "t1", "role": "tor"}],
                           "racks": [{"name": "r1", "tor": "t1"}],
                           "hosts": [{"name": "h1", "rack": "r1", "gpus": 1, "bw": 10000}]})
    jobs = [JobSpec(name=f"p{i}", model="resnet18", dataset_size=4 * 60, epochs=1,
                    batch_size=4, max_gpus=1, arrival=float(i)) for i in range(2)]
    config = run.RunConfig(jobs="x.yaml", topology="one-gpu", compute="emulated",
                           policy="fifo", priority="off", mechanisms=MechanismOptions(pack=True))
    got = model_run(jobs, topo, config, run.run_estimator(topo, "emulated"))
    host, guest = got.records
    assert "batch_compute_s" not in host["segments"][0]
    assert guest["segments"][0]["batch_compute_s"] == pytest.approx(
        guest["batch_compute_s"] * PACK_SLOWDOWN, rel=1e-3)
    assert guest["start"] < host["arrival"] + got.jct["p0"]      # while p0 still runs
    launch_s, close_s = launch_and_close("emulated")
    priced = predict_pass(topo, got.records, None, launch_s, close_s=close_s,
                          server_per_worker_s=server_per_worker_s())
    assert all(got.jct[n] == pytest.approx(priced[n], abs=1e-2) for n in priced)


def _one_job_executor(checkpoint):
    """The exchange model timing one vgg16 job on h1's four GPUs, as the dry run builds it."""
    from end_to_end.model_run import ModelExecutor
    from job_scheduler.core.decisions import StartDecision
    from ps_runtime.launcher import WorkerOptions
    from sluice_common.placement import Placement

    spec = JobSpec(name="v", model="vgg16", dataset_size=4 * 64 * 40, epochs=1, batch_size=64,
                   max_gpus=4, arrival=0.0)
    estimator = run.run_estimator(TOPO, "emulated")
    launch_s, close_s = launch_and_close("emulated")
    ex = ModelExecutor(TOPO, estimator, [spec], WorkerOptions(compute="emulated",
                       bw_scale=TOPO.emulation_bw_scale), None, launch_s, close_s,
                       server_per_worker_s(), checkpoint=checkpoint)
    ex.admit(0, spec)
    decision = StartDecision(0, Placement("v", ("h1",), ("h1",) * 4))
    return ex, decision, estimator.params(spec) * 4 * 2      # float32 params + momentum


@pytest.mark.parametrize("measured", [True, False])
def test_a_suspension_holds_its_gpus_while_the_checkpoint_is_written_and_a_resume_reads_it(measured):
    """Stopped at a batch boundary, the job gives its GPUs back only once its state is
    written and its processes have exited (close + the checkpoint's hold); its next run
    starts up reading that state. Without measured costs a suspension costs a close."""
    from ps_runtime.calibration import CheckpointCosts

    costs = CheckpointCosts(write_mb_s=250.0, read_mb_s=500.0, extra_s=0.3) if measured else None
    ex, decision, state = _one_job_executor(costs)
    ex.launch(decision, None)
    fresh_startup = ex.runs[0].ready - ex.runs[0].launched
    ex.suspend(0, "test")
    t = 0.0
    while ex.runs[0].stopped_at is None:
        t = ex.next_event(t)
        ex.poll(t)
    stopped = ex.runs[0].stopped_at
    _, close_s = launch_and_close("emulated")
    hold = close_s + (state / 1e6 / 250.0 + 0.3 if measured else 0.0)
    assert ex.runs[0].hold_s == pytest.approx(hold)
    assert ex.poll(stopped + hold - 0.01) == []                  # still writing
    assert ex.next_event(stopped) == pytest.approx(stopped + hold)
    (ended,) = ex.poll(stopped + hold)
    assert ended.suspended
    ex.ended(ended)
    ex.launch(decision, None)                                    # the resume
    load_s = state / 1e6 / 500.0 if measured else 0.0
    assert ex.records["v"]["segments"][1].get("load_s", 0.0) == pytest.approx(load_s)
    assert "load_s" not in ex.records["v"]["segments"][0]
    # same placement: the resume's start-up is the fresh one's plus reading the state
    assert ex.runs[0].ready - ex.runs[0].launched == pytest.approx(fresh_startup + load_s)


def test_the_dry_run_charges_the_recorded_checkpoint_costs():
    """The package's recorded costs (sluice calibrate checkpoint) reach the dry run: a
    resumed run of the arm-d draw carries its state's read time."""
    from ps_runtime.calibration import checkpoint_costs

    costs = checkpoint_costs()
    assert costs is not None and costs.write_mb_s > 0 and costs.read_mb_s > 0
    config = arm_config(BASE, ARMS["d"])
    jobs = workload(TOPO, config, 1000, DrawSpec(jobs=10)).jobs
    estimator = run.run_estimator(TOPO, config.compute, config.profile)
    got = model_run(jobs, TOPO, config, estimator)
    specs = {j.name: j for j in jobs}
    resumed = [(r, s) for r in got.records for s in r["segments"][1:]]
    assert resumed
    for r, seg in resumed:
        state = estimator.params(specs[r["name"]]) * 4 * 2
        assert seg["load_s"] == pytest.approx(costs.load_s(state))
