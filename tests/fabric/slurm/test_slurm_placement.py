"""The demo's arms a and b place jobs where Slurm would (a model:
``job_scheduler/core/slurm_placement.py``). Here a real slurmctld (Slurm 22.05, cons_tres +
topology/tree, the local cluster on the two-rack fabric: the demo's two-rack-100g shape and
names with slower links, which slurmctld never sees) chooses the nodes of a
sequence of jobs that ask only for a GPU count (``--ntasks=N --gpus-per-task=1``, one task
per worker, no node list), with jobs ending in between, and every choice is compared with
the model's on the same free GPUs."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter

import pytest

from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.slurm_placement import SlurmTreePlacement
from sluice_common.placement import Placement
from support.slurm_scheduler import slurm

# the demo's two-rack-100g as Slurm sees it (racks of two 4-GPU nodes, the same names), and
# the cluster the other two-rack modules bring up (tests/conftest.py: one bring-up)
SLURM_TOPOLOGY = "two-rack"

# (action, job, GPUs): every free-GPU pattern the model's rules tell apart comes up
STEPS = [("submit", "A", 3), ("submit", "B", 2), ("submit", "C", 4), ("submit", "D", 6),
         ("cancel", "A", 0), ("cancel", "C", 0), ("submit", "E", 5), ("cancel", "B", 0),
         ("submit", "F", 1), ("submit", "G", 2), ("cancel", "D", 0), ("cancel", "E", 0),
         ("submit", "H", 8), ("submit", "I", 3), ("cancel", "H", 0), ("cancel", "I", 0),
         ("submit", "J", 2), ("submit", "K", 3), ("submit", "L", 2), ("submit", "M", 4),
         ("cancel", "J", 0), ("cancel", "K", 0), ("submit", "N", 2)]


def _sbatch(env, name: str, gpus: int) -> int:
    out = subprocess.run(["sbatch", "--parsable", "-J", f"place-{name}", f"--ntasks={gpus}",
                          "--gpus-per-task=1", "-o", "/dev/null", "--wrap", "sleep 600"],
                         env={**os.environ, **env.cluster.env}, capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip().split(";")[0])


def _running_counts(env, job_id: int, timeout: float = 30.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        info = slurm(env).jobs([job_id])[0]
        if info.state == "RUNNING":
            held = slurm(env).job_gpu_indices().get(job_id, {})
            if held:
                return {node: len(ids) for node, ids in held.items()}
        assert time.monotonic() < deadline, f"job {job_id} not running: {info}"
        time.sleep(0.3)


def _cancel(env, job_id: int, timeout: float = 30.0) -> None:
    """scancel, then wait until Slurm no longer counts the job's GPUs as held."""
    subprocess.run(["scancel", str(job_id)], env={**os.environ, **env.cluster.env}, check=True)
    deadline = time.monotonic() + timeout
    while job_id in slurm(env).job_gpu_indices() or not slurm(env).jobs([job_id])[0].terminal:
        assert time.monotonic() < deadline, f"job {job_id} still holds its GPUs"
        time.sleep(0.3)


@pytest.mark.fabric
def test_the_model_chooses_the_nodes_a_real_slurmctld_chooses(slurm_fabric):
    env = slurm_fabric
    state, model = ClusterState(env.topology), SlurmTreePlacement()
    ids, placed, rows = {}, {}, []
    try:
        for action, name, gpus in STEPS:
            if action == "cancel":
                _cancel(env, ids[name])
                state.release(placed[name])
                continue
            p = model.place(state, name, gpus)
            want = dict(Counter(p.worker_hosts))
            ids[name] = _sbatch(env, name, gpus)
            got = _running_counts(env, ids[name])
            rows.append((name, gpus, dict(sorted(got.items())), dict(sorted(want.items()))))
            # the next choice is made on the GPUs Slurm left free (its choice, not the model's)
            placed[name] = Placement(name, (), tuple(h for h, k in sorted(got.items())
                                                     for _ in range(k)))
            state.allocate(placed[name])
        report = "\n".join(f"{n} ({g} GPUs): slurm {s}, model {m}" for n, g, s, m in rows)
        print(report)
        assert all(s == m for _, _, s, m in rows), report
    finally:
        for job_id in ids.values():
            subprocess.run(["scancel", str(job_id)], env={**os.environ, **env.cluster.env},
                           capture_output=True)
