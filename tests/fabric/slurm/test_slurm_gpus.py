"""GPU binding under Slurm: each worker step asks Slurm for its own GPU (``--gres=gpu:1
--exact``; PS steps ``--overlap --gres=none``), the indices Slurm gave every job (its
``scontrol -d show job`` GRES detail) are the truth for capacity, and another user's
GPUs are never handed out. Real Slurm 22.05 daemons on the Mininet fabric."""

from __future__ import annotations

import os
import subprocess

import pytest

from support.slurm_scheduler import ran_on, slurm, start_foreign_job, tiny


@pytest.mark.fabric
def test_two_jobs_on_one_host_disjoint_slurm_gpus_and_a_foreign_jobs_gpu_never_given(
        slurm_fabric, sched_factory):
    env = slurm_fabric
    cli_env = {**os.environ, **env.cluster.env}
    foreign_id = start_foreign_job(env, 1)
    held = slurm(env).job_gpu_indices()[foreign_id]["h1"]
    sched = sched_factory(batches=60)
    sched.submit([tiny("g1", 2), tiny("g2", 1)])
    running = sched.wait(["g1", "g2"], states=("running",))
    assert {n: set(j["placement"]["gpus_by_host"]) for n, j in running.items()} == \
        {"g1": {"h1"}, "g2": {"h1"}}
    jobs = sched.wait(["g1", "g2"])
    recorded = {}
    for name, job in jobs.items():
        steps = [v for v in ran_on(sched, job).values() if v.get("role") == "worker"]
        assert len(steps) == job["gpus"] and all(s["slurm_step_gpus"] for s in steps), steps
        recorded[name] = sorted(s["gpu"] for s in steps)
        # each worker's recorded GPU is the one on the job's record (Slurm's, reconciled)
        assert recorded[name] == job["placement"]["gpu_ids"]["h1"], (name, job["placement"])
    assert not set(recorded["g1"]) & set(recorded["g2"])
    assert not (set(recorded["g1"]) | set(recorded["g2"])) & set(held), (recorded, held)
    subprocess.run(["scancel", str(foreign_id)], env=cli_env, check=True)
