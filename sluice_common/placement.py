"""Where one job runs: the one placement type, from the policy's decision through the
scheduler service's store and the launcher to the report.

Hosts are named as in the topology; ``worker_hosts`` has one entry per worker (= per
GPU), so a host repeats once per GPU it gives. The launcher resolves the names to
addresses (``ps_runtime.plan.HostPlan``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    job: str                        # the job's name (sluice_common.job_id), or its service id
    ps_hosts: tuple[str, ...]
    worker_hosts: tuple[str, ...]   # one entry per worker (= per GPU); repeats allowed

    @property
    def gpus(self) -> int:
        return len(self.worker_hosts)

    def gpus_by_host(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for h in self.worker_hosts:
            out[h] = out.get(h, 0) + 1
        return out
