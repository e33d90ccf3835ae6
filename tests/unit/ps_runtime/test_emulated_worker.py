"""The emulated worker: what it waits and moves per batch (pure), and a real ps-lite job
of emulated workers on loopback that moves those bytes and imports no torch (the same
across a rack uplink of the fabric: tests/fabric/ps_runtime/test_emulated_worker_fabric.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from job_scheduler.core.estimator import Estimator
from sluice_common.jobspec import JobSpec
from sluice_common.models import MODELS
from ps_runtime.emulated_worker import (BYTES_PER_VALUE, batch_plan, key_lengths, parse_args,
                                        wire_bytes)
from ps_runtime.launcher import PSJob, WorkerOptions
from ps_runtime.plan import HostPlan
from ps_runtime.runners import LocalRunner
from ps_runtime.ports import free_port_block as free_base

from support.paths import REPO
from support.ps_jobs import run_tiny_emulated_job


@pytest.mark.parametrize("model,scale", [("resnet18", 0.01), ("vgg16", 0.01), ("alexnet", 0.1),
                                         ("resnet18", 1.0)])
def test_bytes_per_batch_are_the_models_gradients_times_bw_scale(model, scale):
    plan = batch_plan(model, 64, scale)
    grads = MODELS[model].params * 4
    assert plan.model_bytes == grads
    assert abs(plan.wire_bytes - grads * scale) <= BYTES_PER_VALUE
    assert plan.wire_bytes % BYTES_PER_VALUE == 0


def test_resnet18_on_the_two_rack_fabric_moves_468_kb_per_batch():
    # 11,689,512 float32 parameters = 46.76 MB; the two-rack fabric runs at 1/100.
    assert batch_plan("resnet18", 32, 0.01).wire_bytes == 467_580


def test_compute_is_cost_bat_of_the_profile_and_follows_the_batch_size():
    est = Estimator()
    spec = JobSpec(name="x", model="vgg16", dataset_size=1, epochs=1, batch_size=32, max_gpus=1)
    plan = batch_plan("vgg16", 32, 0.01)
    assert plan.compute_s == pytest.approx(est.cost_bat(spec))
    assert batch_plan("vgg16", 128, 0.01).compute_s > plan.compute_s


def test_a_profile_file_changes_the_compute_time(tmp_path):
    prof = tmp_path / "p.yaml"
    prof.write_text("device: slowgpu\nmodels:\n  resnet18:\n    points: {1: 0.5}\n")
    plan = batch_plan("resnet18", 4, 0.01, profile=prof)
    assert plan.compute_s == pytest.approx(2.0)        # one point: alpha(b) = b
    assert "slowgpu" in plan.source


def test_explicit_compute_and_bytes_override_model_and_profile():
    plan = batch_plan("", 1, 0.01, compute_s=0.25, bytes_per_batch=1001)
    assert plan.compute_s == 0.25
    assert plan.wire_bytes == 1004                     # whole float32 values
    assert plan.source == "given"
    with pytest.raises(ValueError):
        batch_plan("", 1, 0.01, compute_s=-1, bytes_per_batch=8)


def test_wire_bytes_rejects_a_bad_scale_and_keeps_one_value():
    assert wire_bytes(1, 0.01) == BYTES_PER_VALUE
    for bad in (0, -0.5, float("inf")):
        with pytest.raises(ValueError):
            wire_bytes(100, bad)


def test_keys_cut_the_bytes_into_buckets():
    assert key_lengths(10 * 2 ** 20, 4 * 2 ** 20) == [2 ** 20, 2 ** 20, 2 ** 19]
    assert sum(key_lengths(467_580, 4 * 2 ** 20)) * 4 == 467_580
    assert key_lengths(4, 4 * 2 ** 20) == [1]


def test_arguments_need_a_model_unless_both_figures_are_given():
    with pytest.raises(SystemExit):
        parse_args(["--job", "j", "--worker-index", "0", "--batches", "3"])
    args = parse_args(["--job", "j", "--worker-index", "0", "--batches", "3",
                       "--compute-s", "0.1", "--bytes-per-batch", "4000"])
    assert args.model is None and args.compute_s == 0.1


def test_the_emulated_worker_module_does_not_import_torch():
    code = ("import sys, ps_runtime.emulated_worker as w; w.batch_plan('resnet18', 8, 0.01); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_an_emulated_job_runs_through_ps_lite_and_reports_every_batch(tmp_path):
    spec = JobSpec(name="t-emu", model="resnet18", dataset_size=64, epochs=1, batch_size=32,
                   max_gpus=2)
    job = PSJob(spec, HostPlan.loopback(1, 2), LocalRunner(), tmp_path, batches=6,
                base_port=free_base(), options=WorkerOptions(compute="emulated", bw_scale=0.01,
                                                             compute_s=0.05))
    with job:
        job.start()
        result = job.wait(timeout=90)
    assert set(result.returncodes.values()) == {0}
    for rank in (0, 1):
        recs = result.batches[rank]
        assert [r.batch for r in recs] == list(range(1, 7))
        # The wait is real: each batch takes at least its compute time, plus the exchange.
        assert all(r.time_s >= 0.05 and r.comm_s is not None for r in recs)
    log = (tmp_path / "worker0.log").read_text()
    assert "0.468 MB pushed and pulled per batch" in log


def test_a_pipelined_exchange_keeps_every_batch_and_is_passed_to_the_worker(tmp_path):
    # 5 keys of ~0.1 MB, at most 2 in flight: pushes wait for earlier pulls
    spec = JobSpec(name="t-pipe", model="resnet18", dataset_size=64, epochs=1, batch_size=32,
                   max_gpus=2)
    options = WorkerOptions(compute="emulated", bw_scale=0.01, compute_s=0.01, bucket_mb=0.1,
                            pipeline_keys=2)
    job = PSJob(spec, HostPlan.loopback(1, 2), LocalRunner(), tmp_path, batches=4,
                base_port=free_base(), options=options)
    with job:
        job.start()
        result = job.wait(timeout=90)
    assert set(result.returncodes.values()) == {0}
    for rank in (0, 1):
        assert [r.batch for r in result.batches[rank]] == [1, 2, 3, 4]
    assert "5 keys" in (tmp_path / "worker0.log").read_text()
    with pytest.raises(SystemExit):
        parse_args(["--job", "j", "--worker-index", "0", "--batches", "3", "--compute-s", "0",
                    "--bytes-per-batch", "4000", "--pipeline-keys", "-1"])


def test_warm_processes_become_the_jobs_processes_and_idle_ones_are_stopped(tmp_path):
    from ps_runtime.warm import WarmRunner

    runner = WarmRunner(LocalRunner(), ["local"], per_host=2)
    try:
        assert runner.wait_ready(timeout=120) == 2
        idle_pids = [p.pid for p in runner.idle["local"]]
        job, result = run_tiny_emulated_job(runner, tmp_path, "t-warm")
        assert set(result.returncodes.values()) == {0}
        assert [r.batch for r in result.batches[0]] == [1, 2, 3]
        # the two warm processes became two of the job's three; the pool was refilled
        assert runner.taken == 3 and runner.cold == 0
        assert set(idle_pids) <= {p.popen.pid for p in job.processes}
        assert "server listening" in (tmp_path / "server0.log").read_text() or \
            "scheduler listening" in (tmp_path / "scheduler0.log").read_text()
    finally:
        runner.close()
    assert all(not runner.idle[h] for h in runner.idle)
