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
