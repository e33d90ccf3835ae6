"""``sluice scheduler --policy sluice --executor slurm`` for real: the
three jobs of tests/unit/job_scheduler/service/test_scheduler_preempt_run.py (long2 shorter: ~102 s) on a 2-GPU
host of a real Slurm 22.05 cluster on the Mininet fabric; the policy suspends the long
job for the short one (its checkpoint, then its Slurm allocation released), resumes it
from its checkpoint as a new Slurm job on one GPU, and resizes it onto both GPUs once
long2 has ended (suspended and started again in one slot: a migration); every job
finishes; each suspend's cost is in the store. Emulated compute at the profile's
Cost_bat: the jobs take about the seconds the policy predicts (~3.5 minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from job_scheduler.service.store import JobStore
from support.paths import REPO
from support.preempt import JOBS
from support.slurm_scheduler import Scheduler

pytestmark = pytest.mark.fabric
SLURM_TOPOLOGY = str(REPO / "tests" / "data" / "two-gpu-host.yaml")


def test_sluice_policy_through_slurm_suspends_migrates_and_finishes(slurm_fabric, tmp_path):
    jobs = yaml.safe_load(yaml.safe_dump(JOBS))
    jobs["jobs"][1]["dataset_size"] = 256000      # long2: ~102 s (the simulator's case)
    jobs["jobs"][2]["dataset_size"] = 640         # short1: 20 batches here
    sched = Scheduler(slurm_fabric, tmp_path)
    sched.args = ["--topology", SLURM_TOPOLOGY, "--executor", "slurm", "--policy", "sluice",
                  "--db", str(sched.db), "--listen", "127.0.0.1:0", "--slot", "1",
                  "--slurm-compute", "emulated", "--slurm-bytes-per-batch", "300000"]
    sched.start()
    try:
        sched.submit(jobs["jobs"])
        sched.wait([j["name"] for j in jobs["jobs"]], timeout=600)
    finally:
        sched.stop()
    store = JobStore(sched.db)
    events = {j.name: store.events(j.id) for j in store.jobs()}
    t0 = min(at for ev in events.values() for at, _, _ in ev)
    for name, ev in events.items():
        for at, kind, detail in ev:
            print(f"t={at - t0:.1f} {name} {kind} {detail if kind != 'queued' else ''}")
    kinds = {n: [k for _, k, _ in ev] for n, ev in events.items()}
    suspends = [d for ev in events.values() for _, k, d in ev if k == "suspended"]
    assert suspends and all("suspend_s=" in d for d in suspends), kinds
    assert any("resumed" in k for k in kinds.values()), kinds
    assert any("migrated" in k for k in kinds.values()), kinds
    resumed = [j for j in store.jobs() if j.resume]
    assert resumed and all(Path(j.resume["checkpoint"]).is_dir() for j in resumed)
    assert all(j.state == "finished" for j in store.jobs())
