"""The scheduler service suspends and resumes real jobs: a
preemptive policy's Suspend checkpoints a local ``sluice train`` job and frees its GPUs;
its resume starts it from the checkpoint on the GPUs of the new decision; the store
keeps the checkpoint over a restart and records each suspend's cost; a job suspended
from outside (SIGUSR1, what Slurm's ``--signal`` sends) is re-queued, not failed."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from job_scheduler.core.decisions import StartDecision, Suspend
from job_scheduler.core.estimator import Estimator
from job_scheduler.service.executors import LocalExecutor
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.store import JobStore
from ps_runtime.ports import free_port_block
from sluice_common.placement import GpuGrant, Placement
from topologies import load_topology
from support.preempt import ScriptedStep, _batches

TOPO = load_topology("two-rack")
EST = Estimator()
BATCHES = 20
# torch compute on the CPU, fixed seeds, two workers: a deterministic job. A suspend
# request lands at the next batch boundary; each test asks while the job starts (a
# policy's Suspend as soon as it is launched, SIGUSR1 once its workers exist), seconds
# before its first batch ends: the job stops after batch 1 whatever the machine's speed,
# with none of the race a request made mid-run has against the job's end.


def _command(job, decision, run_dir: Path) -> str:
    """``sluice train`` on the job with torch compute, from its checkpoint when it has one."""
    import shlex

    import yaml

    from sluice_common.jobspec import job_to_dict
    (run_dir / "job.yaml").write_text(yaml.safe_dump({"jobs": [job_to_dict(job.spec)]}))
    argv = [sys.executable, "-m", "sluice", "train", str(run_dir / "job.yaml"), "--job",
            job.name, "--workers", str(decision.gpus), "--servers", "1", "--compute", "torch",
            "--batches", str(BATCHES), "--out", str(run_dir / "ps"), "--quiet", "--suspendable"]
    if (job.resume or {}).get("checkpoint"):
        argv += ["--resume", job.resume["checkpoint"]]
    return " ".join(map(shlex.quote, argv)) + ' --base-port "$SLUICE_BASE_PORT"'


def _service(tmp_path, step=None) -> SchedulerService:
    os.environ["SLUICE_BASE_PORT"] = str(free_port_block())
    return SchedulerService(JobStore(tmp_path / "jobs.db"), TOPO, step or ScriptedStep(),
                            {"local": LocalExecutor(tmp_path / "runs", _command)}, "local")


def _start(svc, job_id: int, host: str, ids: list[int]) -> None:
    placement = Placement(str(job_id), (host,), (host,) * len(ids))
    svc.policy.next = [StartDecision(job_id, placement, GpuGrant.of({host: ids}))]
    svc.tick()


def _until(predicate, timeout=240.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("not in time")


def _group(pgid: int) -> list[int]:
    """The processes of process group ``pgid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            out.append(int(stat.parent.name))
    return out


def _checksum(run_dir: Path) -> str:
    return next(line for line in (run_dir / "ps" / "worker0.log").read_text().splitlines()
                if line.startswith("weights_checksum"))


def _submit(svc, name: str) -> int:
    (job_id,) = svc.submit(f"jobs:\n  - {{name: {name}, model: smallcnn, dataset_size: 4096, "
                           "epochs: 1, batch_size: 16, max_gpus: 2}\n", "t.yaml").job_ids
    svc.tick()
    return job_id


def _finish(svc, job_id: int) -> None:
    def done():
        svc.tick()
        return svc.store.get(job_id).state != "running"
    _until(done)
    assert svc.store.get(job_id).state == "finished", svc.store.get(job_id)


@pytest.mark.slow
def test_a_suspended_local_job_resumes_on_other_gpus_bitwise_equal_to_a_straight_run(tmp_path):
    svc = _service(tmp_path / "a")
    straight = _submit(svc, "straight")
    _start(svc, straight, "h1", [0, 1])
    _finish(svc, straight)
    want = _checksum(Path(svc.store.get(straight).run_dir))

    job = _submit(svc, "moved")
    _start(svc, job, "h1", [2, 3])
    first = Path(svc.store.get(job).run_dir)
    svc.policy.next = [Suspend(job, 4.0, "policy")]     # while it starts: after batch 1
    svc.tick()
    rec = svc.store.get(job)
    assert rec.resume["batch"] == 1 and _batches(first) == 1, rec.resume
    assert rec.state == "queued" and rec.gpus is None and svc.health()["free_gpus"] == 16
    assert rec.resume["checkpoint"] == str(first / "ps" / "checkpoint")
    assert 0 < rec.resume["work_left"] < 1 and rec.resume["suspend_s"] > 0
    assert svc.policy.added[job]["work_left"] == rec.resume["work_left"]
    (suspended,) = [d for _, kind, d in svc.store.events(job) if kind == "suspended"]
    assert "suspend_s=" in suspended and "checkpoint" in suspended
    # a restart of the service keeps what it resumes from, and shows it to the policy
    svc.store.close()
    again = _service(tmp_path / "a")
    again.tick()
    assert again.store.get(job).resume == rec.resume
    assert again.policy.added[job] == {"work_left": rec.resume["work_left"], "restore_s": 4.0}
    _start(again, job, "h3", [1, 2])            # another host, other GPUs
    resumed = again.store.get(job)
    assert resumed.placement["gpu_ids"] == {"h3": [1, 2]} and resumed.attempts == 1
    assert f"--resume {rec.resume['checkpoint']}" in (Path(resumed.run_dir) / "command").read_text()
    _finish(again, job)
    assert _checksum(Path(again.store.get(job).run_dir)) == want
    kinds = [k for _, k, _ in again.store.events(job)]
    assert kinds.count("suspended") == 1 and "resumed" in kinds and "restarted" in kinds
    (restart,) = [d for _, k, d in again.store.events(job) if k == "restarted"]
    assert float(restart.split("restart_s=")[1].split()[0]) > 0


@pytest.mark.slow
def test_sigusr1_suspends_a_local_job_and_the_service_requeues_it(tmp_path):
    """What Slurm's --signal=USR1@N does to a job: a checkpointed stop, re-queued to
    resume (not a failure), its GPUs free."""
    svc = _service(tmp_path)
    job = _submit(svc, "signalled")
    _start(svc, job, "h2", [0, 1])
    run_dir = Path(svc.store.get(job).run_dir)
    # sluice train handles SIGUSR1 from before it starts the workers
    _until(lambda: (run_dir / "ps" / "worker0.log").exists())
    group = int((run_dir / "pid").read_text())
    # sluice train itself (Slurm's --signal=B:USR1 signals the batch shell that runs it)
    (train,) = [pid for pid in _group(group)
                if b"sluice\x00train" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    os.kill(train, signal.SIGUSR1)

    def requeued():
        svc.tick()
        return svc.store.get(job).state != "running"
    _until(requeued)
    rec = svc.store.get(job)
    assert rec.state == "queued" and rec.exit_code is None and rec.attempts == 0, (
        rec, f"the job reached batch {_batches(run_dir)} of {BATCHES}")
    assert rec.resume["checkpoint"] == str(run_dir / "ps" / "checkpoint")
    assert [k for _, k, _ in svc.store.events(job)][-1] == "suspended"
    assert svc.health()["free_gpus"] == 16
    _start(svc, job, "h2", [2, 3])
    _finish(svc, job)


def test_a_recorded_gpu_index_its_host_lacks_fails_that_job_alone_under_sluice(tmp_path, caplog):
    """Bad input under a preemptive policy: the job fails with the host and the index
    named, is re-queued by the retry policy, and the other job keeps its GPUs."""
    from job_scheduler.service.executors import SimulatedExecutor
    from job_scheduler.service.policy_step import make_policy_step

    def service():
        return SchedulerService(JobStore(tmp_path / "jobs.db"), TOPO,
                                make_policy_step("sluice", TOPO, EST),
                                {"simulated": SimulatedExecutor(lambda spec, d: 1000.0)},
                                "simulated", clock=lambda: 1_000_000.0, max_retries=1)
    svc = service()
    svc.submit("jobs:\n" + "".join(
        f"  - {{name: {n}, model: resnet18, dataset_size: 1000, epochs: 1, batch_size: 32, "
        f"max_gpus: 2}}\n" for n in ("good", "bad")), "f.yaml")
    svc.tick()
    good, bad = sorted(svc.store.jobs(["running"]), key=lambda j: j.name != "good")
    host = next(iter(bad.placement["gpu_ids"]))
    svc.store.update(bad.id, placement={**bad.placement, "gpu_ids": {host: [9]}})
    svc.store.close()
    again = service()
    again.tick()
    failure = [d for _, e, d in again.store.events(bad.id) if e == "retry"]
    assert len(failure) == 1 and f"host {host} has no GPU index 9" in failure[0]
    assert any("no GPU index 9" in r.message for r in caplog.records)
    after, kept = again.store.get(bad.id), again.store.get(good.id)
    assert after.state in ("running", "queued") and after.attempts <= 2
    assert (kept.state, kept.placement, kept.attempts) == ("running", good.placement, 1)
    assert 9 not in [i for ids in (after.placement or {}).get("gpu_ids", {}).values() for i in ids]


def test_a_suspend_that_fails_stops_the_job_and_requeues_it_saying_so(tmp_path):
    """No checkpoint came (a job that ignores the request): the job is stopped, its GPUs
    freed, and it waits again to start over; the event says so."""
    from job_scheduler.service.executors import SimulatedExecutor

    class Stubborn(SimulatedExecutor):
        stopped = []

        def suspend(self, job, now):
            raise RuntimeError("no checkpoint within 300 s")

        def stop(self, job):
            self.stopped.append(job.id)
    executor = Stubborn(lambda spec, d: 1000.0)
    svc = SchedulerService(JobStore(tmp_path / "jobs.db"), TOPO, ScriptedStep(),
                           {"simulated": executor}, "simulated")
    job = _submit(svc, "stubborn")
    _start(svc, job, "h1", [0, 1])
    svc.policy.next = [Suspend(job, 0.0, "policy")]
    svc.tick()
    rec = svc.store.get(job)
    assert rec.state == "queued" and executor.stopped == [job] and rec.resume["work_left"] == 1.0
    assert "checkpoint" not in rec.resume and svc.health()["free_gpus"] == 16
    (detail,) = [d for _, k, d in svc.store.events(job) if k == "suspended"]
    assert "the suspend failed (no checkpoint within 300 s)" in detail
