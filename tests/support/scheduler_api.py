"""The scheduler behind its HTTP API in tests: the admin token and a simulated service."""

from __future__ import annotations

import time

from job_scheduler.core.estimator import Estimator
from job_scheduler.service.executors import SimulatedExecutor
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.store import JobStore
from topologies import load_topology
from support.http_call import request

TOPO = load_topology("two-rack")
TOKEN = "scheduler-admin-token-0123"


def make_service(tmp_path, policy="fifo", clock=None):
    est = Estimator()
    executors = {"simulated": SimulatedExecutor(lambda spec, d: 100.0, 1.0)}
    return SchedulerService(JobStore(tmp_path / "jobs.db"), TOPO,
                            make_policy_step(policy, TOPO, est), executors, "simulated",
                            clock=clock or time.time)


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def job_file(*names: str, arrival: float = 0.0, max_gpus: int = 2, size: int = 1000) -> str:
    return "jobs:\n" + "".join(
        f"  - {{name: {n}, model: resnet18, dataset_size: {size}, epochs: 1, "
        f"batch_size: 32, max_gpus: {max_gpus}, arrival: {arrival}}}\n" for n in names)


def call(server, method, path, body: bytes | None = None, headers=None):
    return request(server, method, path, body, headers, timeout=10)
