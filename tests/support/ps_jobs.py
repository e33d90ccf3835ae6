"""A small real PS job on loopback (smallcnn, ps-lite) for the PS runtime tests."""

from __future__ import annotations

from pathlib import Path

from ps_runtime.launcher import PSJob, WorkerOptions
from ps_runtime.plan import HostPlan
from ps_runtime.ports import free_port_block as free_base
from ps_runtime.runners import LocalRunner
from sluice_common.jobspec import JobSpec

SMALL = JobSpec(name="t-small", model="smallcnn", dataset_size=4096, epochs=1, batch_size=32,
                max_gpus=2)




def small_job(tmp_path: Path, batches: int, workers: int = 2, servers: int = 1,
              **kwargs) -> PSJob:
    return PSJob(SMALL, HostPlan.loopback(servers, workers), LocalRunner(), tmp_path,
                 batches=batches, base_port=free_base(), options=WorkerOptions(threads=1),
                 grace=2.0, **kwargs)


def run_tiny_emulated_job(runner, tmp_path: Path, name: str):
    """A 3-batch emulated resnet18 job (scheduler, 1 server, 1 worker) on ``runner``: the
    job (its processes) and its result, for the warm-pool and fork-server tests."""
    spec = JobSpec(name=name, model="resnet18", dataset_size=64, epochs=1, batch_size=32,
                   max_gpus=1)
    job = PSJob(spec, HostPlan.loopback(1, 1), runner, tmp_path, batches=3,
                base_port=free_base(), options=WorkerOptions(compute="emulated",
                                                             bw_scale=0.01, compute_s=0.01))
    with job:
        job.start()
        result = job.wait(timeout=120)
    return job, result
