"""Suspend and resume through a real Slurm 22.05 cluster on the Mininet fabric (the
``slurm_fabric`` fixture): the service suspends a running Slurm job (the
checkpoint first, then ``scancel``: its allocation released) and resumes it as a new
submission from the checkpoint on another host; Slurm's own warning
(``--signal=B:USR1@N``, sent here with ``scancel --batch --signal=USR1``) is the same
checkpointed stop, and the service re-queues the job to resume, not as a failure; a
migration (suspended and started again in one slot, as the sluice policy resizes a job:
tests/unit/job_scheduler/service/test_scheduler_preempt_run.py runs that policy on real
jobs) takes the GPU the first Slurm job held plus one more. Jobs are tiny (emulated
compute, a few batches)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from job_scheduler.core.decisions import StartDecision, Suspend
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.slurm_executor import SlurmExecutor, SlurmJobOptions
from job_scheduler.service.store import JobStore
from ps_runtime.checkpoint import read_manifest, resized_last_batch
from slurm_client import SlurmClient
from sluice_common.placement import GpuGrant, Placement
from support.preempt import ScriptedStep, _batches
from topologies import load_topology

pytestmark = pytest.mark.fabric
SLURM_TOPOLOGY = "two-rack"
# A job is asked to stop while it starts (its Slurm job running, its processes seconds
# from their first batch's end): it stops after batch 1 whatever the machine's speed.
BATCHES = 10


def _service(env, tmp_path: Path, **options) -> SchedulerService:
    topo = load_topology(SLURM_TOPOLOGY)
    executor = SlurmExecutor(SlurmClient(env.cluster.env), topo, tmp_path / "runs",
                             SlurmJobOptions(compute="emulated", batches=BATCHES, compute_s=0.2,
                                             bytes_per_batch=300000, **options), tag="pre")
    return SchedulerService(JobStore(tmp_path / "jobs.db"), topo, ScriptedStep(),
                            {"slurm": executor}, "slurm", capacity=executor.capacity)


def _submit(svc, name: str) -> int:
    body = yaml.safe_dump({"jobs": [{"name": name, "model": "resnet18", "batch_size": 8,
                                     "dataset_size": 64, "epochs": 1, "max_gpus": 2}]})
    (job_id,) = svc.submit(body, "t.yaml").job_ids
    svc.tick()
    return job_id


def _start(svc, job_id: int, host: str, ids: list[int]) -> Path:
    placement = Placement(str(job_id), (host,), (host,) * len(ids))
    svc.policy.next = [StartDecision(job_id, placement, GpuGrant.of({host: ids}))]
    svc.tick()
    return Path(svc.store.get(job_id).run_dir)


def _until(predicate, timeout=180.0, svc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if svc is not None:
            svc.tick()
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError("not in time")


def _slurm_running(env, svc, job: int) -> bool:
    """Slurm runs the job's allocation (its processes are still starting)."""
    slurm_id = svc.store.get(job).external_id
    return slurm_id is not None and _slurm_state(env, int(slurm_id)) == "RUNNING"


def _slurm_state(env, slurm_id: int) -> str | None:
    parts = SlurmClient(env.cluster.env).jobs([slurm_id])
    return parts[0].state if parts else None


def _cleanup(env) -> None:
    cli_env = {**os.environ, **env.cluster.env}
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env=cli_env, capture_output=True,
                         text=True).stdout.split()
    for jid in sorted({j.split("+")[0] for j in out}):
        subprocess.run(["scancel", jid], env=cli_env, capture_output=True)


def test_a_suspend_checkpoints_then_releases_the_allocation_and_resumes_elsewhere(
        slurm_fabric, tmp_path):
    env = slurm_fabric
    svc = _service(env, tmp_path)
    try:
        job = _submit(svc, "moving")
        first = _start(svc, job, "h1", [0, 1])
        _until(lambda: _slurm_running(env, svc, job), svc=svc)
        slurm_id = int(svc.store.get(job).external_id)
        svc.policy.next = [Suspend(job, 0.0, "policy")]
        svc.tick()
        rec = svc.store.get(job)
        assert rec.resume["batch"] == 1 and _batches(first) == 1, rec.resume
        assert rec.state == "queued" and rec.resume["checkpoint"] == str(first / "ps" / "checkpoint")
        assert 0 < rec.resume["work_left"] < 1 and rec.resume["suspend_s"] > 0
        _until(lambda: _slurm_state(env, slurm_id) in (None, "CANCELLED", "COMPLETED"))
        second = _start(svc, job, "h3", [2, 3])          # another host, other GPUs
        assert second != first and svc.store.get(job).placement["gpu_ids"] == {"h3": [2, 3]}
        _until(lambda: svc.store.get(job).state != "running", timeout=240, svc=svc)
        done = svc.store.get(job)
        assert done.state == "finished", (done.state, done.reason)
        stopped = rec.resume["batch"]
        # the resumed run trained only the batches after the checkpoint, on h3
        plan = json.loads((second / "plan.json").read_text())
        assert plan["resume_from"] == rec.resume["checkpoint"]
        log = (second / "ps" / "worker0.log").read_text()
        assert f"batch {stopped + 1} " in log and "batch 1 " not in log
        hosts = {json.loads(p.read_text())["hostname"] for p in (second / "ran_on").glob("worker*.json")}
        assert hosts == {"h3"}
        kinds = [k for _, k, _ in svc.store.events(job)]
        assert kinds.count("suspended") == 1 and "resumed" in kinds and "restarted" not in kinds[:2]
    finally:
        _cleanup(env)


def test_slurms_usr1_warning_suspends_and_the_job_is_requeued_not_failed(slurm_fabric,
                                                                          tmp_path):
    env = slurm_fabric
    svc = _service(env, tmp_path)
    cli_env = {**os.environ, **env.cluster.env}
    try:
        job = _submit(svc, "warned")
        first = _start(svc, job, "h2", [0, 1])
        # the batch script handles USR1 from before it starts the job's processes
        _until(lambda: (first / "ps" / "worker0.log").exists(), svc=svc)
        slurm_id = int(svc.store.get(job).external_id)
        # what Slurm does N s before a preemption or the time limit (--signal=B:USR1@N)
        subprocess.run(["scancel", "--batch", "--signal=USR1", str(slurm_id)], env=cli_env,
                       check=True)
        _until(lambda: svc.store.get(job).state != "running", svc=svc)
        rec = svc.store.get(job)
        assert rec.state == "queued" and rec.attempts == 0, (rec.state, rec.reason)
        assert rec.resume["checkpoint"] == str(first / "ps" / "checkpoint")
        _until(lambda: _slurm_state(env, slurm_id) in (None, "CANCELLED", "COMPLETED"))
        _start(svc, job, "h2", [2, 3])
        _until(lambda: svc.store.get(job).state != "running", timeout=240, svc=svc)
        assert svc.store.get(job).state == "finished"
        assert [k for _, k, _ in svc.store.events(job)].count("suspended") == 1
    finally:
        _cleanup(env)


def test_a_migration_restarts_the_job_on_its_freed_gpu_and_one_more_in_the_same_slot(
        slurm_fabric, tmp_path):
    env = slurm_fabric
    svc = _service(env, tmp_path)
    try:
        job = _submit(svc, "resized")
        first = _start(svc, job, "h4", [0])
        _until(lambda: _slurm_running(env, svc, job), svc=svc)
        slurm_id = int(svc.store.get(job).external_id)
        # one slot: the suspend (checkpoint, scancel), then the start on two GPUs, one of
        # them the GPU Slurm still counts as the first job's until it has ended
        svc.policy.next = [Suspend(job, 0.0, "policy"),
                           StartDecision(job, Placement(str(job), ("h4",), ("h4", "h4")),
                                         GpuGrant.of({"h4": [0, 1]}))]
        svc.tick()
        rec = svc.store.get(job)
        kinds = [k for _, k, _ in svc.store.events(job)]
        assert kinds[-2:] == ["suspended", "migrated"], kinds
        assert rec.state == "running" and rec.placement["gpu_ids"] == {"h4": [0, 1]}
        second = Path(rec.run_dir)
        assert second != first and rec.resume["checkpoint"] == str(first / "ps" / "checkpoint")
        _until(lambda: svc.store.get(job).state != "running", timeout=240, svc=svc)
        done = svc.store.get(job)
        assert done.state == "finished", (done.state, done.reason)
        assert _slurm_state(env, slurm_id) in (None, "CANCELLED", "COMPLETED")
        assert int(done.external_id) != slurm_id
        # the samples left, spread over two workers, each from the checkpoint's batch on
        m = read_manifest(rec.resume["checkpoint"])
        plan = json.loads((second / "plan.json").read_text())
        assert plan["resume_from"] == rec.resume["checkpoint"] and len(plan["workers"]) == 2
        assert (m.workers, m.batches) == (1, BATCHES)
        assert plan["batches"] == resized_last_batch(m.batch, m.batches, 1, 2) < BATCHES
        for w in (0, 1):
            log = (second / "ps" / f"worker{w}.log").read_text()
            assert f"batch {m.batch + 1} " in log and f"batch {plan['batches']} " in log
            assert "batch 1 " not in log
        hosts = {json.loads(p.read_text())["hostname"]
                 for p in (second / "ran_on").glob("worker*.json")}
        assert hosts == {"h4"}
    finally:
        _cleanup(env)
