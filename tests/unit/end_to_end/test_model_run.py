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
