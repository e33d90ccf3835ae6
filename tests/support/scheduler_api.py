"""The scheduler behind its HTTP API in tests: the admin token and a simulated service."""

from __future__ import annotations

import time

from job_scheduler.core.estimator import Estimator
from job_scheduler.service.executors import SimulatedExecutor
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.store import JobStore
from topologies import load_topology

TOPO = load_topology("two-rack")
TOKEN = "scheduler-admin-token-0123"


def make_service(tmp_path, policy="fifo", clock=None):
    est = Estimator()
    executors = {"simulated": SimulatedExecutor(lambda spec, d: 100.0, 1.0)}
    return SchedulerService(JobStore(tmp_path / "jobs.db"), TOPO,
                            make_policy_step(policy, TOPO, est), executors, "simulated",
                            clock=clock or time.time)
