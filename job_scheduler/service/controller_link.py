"""Closing the loop: the scheduler service tells the SDN controller about its jobs.

When a job starts, its exact endpoints (the topology IPs of its PS and worker hosts and
the fixed ps-lite ports of ``ps_runtime.plan.PortPlan``) are registered with the
controller, so it recognises the job's push/pull flows without guessing. When a job
ends — finished, failed (a worker crashed) or cancelled — the job is removed and the
controller deletes its flow rules. The controller's job id is the job's name: that is
what the job's workers report progress under (``ps_runtime.launcher``). With a
controller per pod, job_scheduler/service/controller_map.py picks the one of the job's pod.
"""

from __future__ import annotations

import logging
import os
import re

from job_scheduler.service.store import JobRecord
from ps_runtime.plan import HostPlan, PortPlan, registration
from sluice_common.errors import option_error
from topologies import Topology

log = logging.getLogger("sluice.scheduler.controller")

CONTROLLER_TOKEN_ENVS = ("SLUICE_CONTROLLER_TOKEN", "SLUICE_ADMIN_TOKEN")
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def controller_job_id(job: JobRecord) -> str:
    return _BAD_ID_CHARS.sub("-", job.name)[:64]


class ControllerNotifier:
    def __init__(self, url: str, topology: Topology):
        try:
            from controller.client import ControllerClient
        except ImportError as err:
            raise option_error("controller", f"the controller client is not available: {err}")
        token = next(filter(None, map(os.environ.get, CONTROLLER_TOKEN_ENVS)), None)
        if not token:
            raise option_error("controller", "the controller's admin token is needed (env "
                             f"{' or '.join(CONTROLLER_TOKEN_ENVS)})")
        # https: what docs/deploy.md asks for when the API is off loopback (the client
        # checks the certificate against the system CAs, or SLUICE_CA_FILE)
        if not url.startswith(("http://", "https://")):
            raise option_error("controller", f"must be an http:// or https:// URL, got {url!r}")
        self.client = ControllerClient(url, admin_token=token)
        self.topology = topology
        self.where = self.client.url      # what the service's log says it talks to

    def job_started(self, job: JobRecord) -> dict[str, str]:
        """Register the job; returns environment for the job's processes (the
        controller URL and the per-job progress token), never stored."""
        placement = job.placement or {}
        hosts = HostPlan.on_hosts(self.topology, list(placement["ps_hosts"]),
                                  list(placement["worker_hosts"]))
        answer = self.client.register_job(registration(controller_job_id(job), hosts,
                                                       PortPlan.for_job(job.name, hosts)))
        env = {"SLUICE_CONTROLLER_URL": self.client.url}
        if isinstance(answer, dict) and answer.get("token"):
            env["SLUICE_CONTROLLER_JOB_TOKEN"] = answer["token"]
        return env

    def job_ended(self, job: JobRecord) -> None:
        self.client.remove_job(controller_job_id(job))

