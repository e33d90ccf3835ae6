"""``sluice scheduler --policy sluice --executor local`` for real:
three ``sluice train`` jobs (MXNet ps-lite, emulated compute) on a two-GPU host; the
policy suspends the long job for a short one (a checkpoint, its GPU freed), resumes it,
and resizes it onto both GPUs once they are idle (suspended and started again in one
slot: a migration); every job finishes, every suspend's cost is in the store. The
policy sees any executor through the service alone (progress, suspend, start); the Slurm
executor's side of each step (a checkpointed stop that releases the allocation, a resume
elsewhere, a migration onto the freed GPU and one more) runs on a real Slurm cluster in
tests/fabric/slurm/test_slurm_preempt.py.

The jobs' model sizes are what the policy prices (the H100 profile: long1 ~164 s on one
GPU, 85 s on two; long2 ~154 s); each really runs a number of batches per worker
(``--batches``: long1 200, long2 150, short1 1), and the service shows the policy each
job's measured progress (its workers' logs). On this machine a job's start-up takes
10-20 s: short1 ends while long2 has most of its work left, so long1 resumes on one GPU
and is resized onto both when long2 ends."""

from __future__ import annotations

import sys
import time

import pytest
import yaml

from job_scheduler.service.client import SchedulerClient
from job_scheduler.service.store import JobStore
from support.scheduler_process import ServiceProcess, wait_for
from support.preempt import JOBS

pytestmark = pytest.mark.slow

TWO_GPUS = """name: two-gpu
switches: [{name: t1, role: tor}]
racks: [{name: r1, tor: t1}]
hosts: [{name: h1, rack: r1, gpus: 2, bw: 10000}]
"""
# {resume_from} is empty on a first start; --batches: the real length (module docstring)
COMMAND = (sys.executable + " -m sluice train {jobs} --job {{name}} --workers {{gpus}} "
           "--servers 1 --compute emulated --batches $(case {{name}} in (long1) echo 200;; "
           "(long2) echo 150;; (*) echo 1;; esac) "
           "--out {{run_dir}}/ps --quiet --suspendable --base-port $SLUICE_BASE_PORT "
           "$(test -n {{resume_from}} && echo --resume {{resume_from}})")


def test_sluice_policy_suspends_resumes_and_migrates_real_jobs(tmp_path):
    (tmp_path / "two.yaml").write_text(TWO_GPUS)
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(yaml.safe_dump(JOBS))
    svc = ServiceProcess(tmp_path, "--slot", "1", "--executor", "local", "--policy", "sluice",
                         "--topology", str(tmp_path / "two.yaml"),
                         "--local-command", COMMAND.format(jobs=jobs))
    svc.start()
    try:
        client = SchedulerClient(svc.url, timeout=10)
        started = time.monotonic()
        client.submit(jobs.read_text(), "jobs.yaml")

        def ended():
            states = {j["name"]: j["state"] for j in client.jobs()}
            assert not {"failed", "cancelled"} & set(states.values()), client.jobs()
            return all(s == "finished" for s in states.values()) and len(states) == 3
        wait_for(ended, timeout=600, interval=1.0)
        wall = time.monotonic() - started
    finally:
        svc.stop()
    store = JobStore(svc.db)
    events = {j.name: store.events(j.id) for j in store.jobs()}
    records = {j.name: j for j in store.jobs()}
    kinds = {n: [k for _, k, _ in ev] for n, ev in events.items()}
    print(f"wall {wall:.0f} s")
    for name, ev in events.items():
        for at, kind, detail in ev:
            print(f"{name:7} {kind:10} {detail}")
    suspends = [d for ev in events.values() for _, k, d in ev if k == "suspended"]
    assert suspends, kinds
    assert all("suspend_s=" in d for d in suspends)           # each suspend's cost
    assert any("migrated" in k for k in kinds.values()), kinds
    resumed = [r for r in records.values() if r.resume]
    assert resumed and all(r.resume.get("checkpoint") for r in resumed)
    assert all(r.state == "finished" for r in records.values())
