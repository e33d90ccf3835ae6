"""The scheduler service in process for tests: a job file, a service on a temp store."""

from __future__ import annotations

import time

from job_scheduler.core.estimator import Estimator
from job_scheduler.service.executors import LocalExecutor, SimulatedExecutor, template_command
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.store import JobStore
from topologies import load_topology

TOPO = load_topology("two-rack")
EST = Estimator()


def job_file(*names: str, max_gpus: int = 2, model: str = "resnet18") -> str:
    return "jobs:\n" + "".join(
        f"  - {{name: {n}, model: {model}, dataset_size: 1000, epochs: 1, batch_size: 32, "
        f"max_gpus: {max_gpus}}}\n" for n in names)


def make_service(tmp_path, executor="simulated", policy="fifo", clock=None, command=None,
                 store=None, **kw):
    store = store or JobStore(tmp_path / "jobs.db")
    executors = {
        "simulated": SimulatedExecutor(lambda spec, d: 100.0 * spec.max_gpus / d.gpus, 1.0),
        "local": LocalExecutor(tmp_path / "runs", template_command(command) if command else None),
    }
    return SchedulerService(store, TOPO, make_policy_step(policy, TOPO, EST), executors, executor,
                            clock=clock or time.time, **kw)
