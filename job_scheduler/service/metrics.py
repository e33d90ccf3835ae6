"""The scheduler service's Prometheus series (``prometheus_client``), read at scrape time.

    sluice_scheduler_jobs{state}        jobs by state (queued, running, done, ...)
    sluice_scheduler_queue_length       jobs waiting
    sluice_scheduler_queued_jobs{reason} jobs waiting, by why (job_scheduler/service/waits.py)
    sluice_scheduler_free_gpus          GPUs not held by a running job
    sluice_scheduler_total_gpus         GPUs of the topology
    sluice_scheduler_lyapunov_q         Q(t): queued work, seconds (lyapunov policy only)
    sluice_scheduler_lyapunov_z         Z(t): the delay-tolerant virtual queue (lyapunov only)
    sluice_scheduler_slots_total        scheduling slots run
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from job_scheduler.service.store import STATES

# name -> help; the README's metrics reference is generated from this table
SERIES = {
    "sluice_scheduler_jobs": "jobs by state",
    "sluice_scheduler_queue_length": "jobs waiting to start",
    "sluice_scheduler_queued_jobs": "jobs waiting, by reason code (gpus, behind, arrival, "
                                    "policy, suspended; slurm: started, kept PENDING by "
                                    "Slurm)",
    "sluice_scheduler_free_gpus": "GPUs not held by a running job",
    "sluice_scheduler_total_gpus": "GPUs of the topology",
    "sluice_scheduler_lyapunov_q": "Q(t), queued work in seconds (lyapunov policy only)",
    "sluice_scheduler_lyapunov_z": "Z(t), the delay-tolerant virtual queue (lyapunov policy "
                                   "only)",
    "sluice_scheduler_slots_total": "scheduling slots run",
}


class _ServiceCollector:
    def __init__(self, service: Callable):
        self.service = service        # a callable: the service may be attached late

    def collect(self):
        svc = self.service()
        if svc is None:
            return
        counts = svc.store.counts()
        jobs = GaugeMetricFamily("sluice_scheduler_jobs", SERIES["sluice_scheduler_jobs"],
                                 labels=["state"])
        for state in STATES:
            jobs.add_metric([state], counts.get(state, 0))
        yield jobs
        health = svc.health()
        for name, value in (("sluice_scheduler_queue_length", counts.get("queued", 0)),
                            ("sluice_scheduler_free_gpus", health["free_gpus"]),
                            ("sluice_scheduler_total_gpus", health["total_gpus"])):
            yield GaugeMetricFamily(name, SERIES[name], value=value)
        waits = getattr(svc, "waits", None)
        if waits is not None:
            by_reason = GaugeMetricFamily("sluice_scheduler_queued_jobs",
                                          SERIES["sluice_scheduler_queued_jobs"],
                                          labels=["reason"])
            for code, n in waits.queued_by_reason().items():
                by_reason.add_metric([code], n)
            yield by_reason
        policy = getattr(svc.policy, "policy", None)
        if getattr(policy, "Q", None) is not None:        # the lyapunov policy
            yield GaugeMetricFamily("sluice_scheduler_lyapunov_q",
                                    SERIES["sluice_scheduler_lyapunov_q"], value=policy.Q)
            yield GaugeMetricFamily("sluice_scheduler_lyapunov_z",
                                    SERIES["sluice_scheduler_lyapunov_z"], value=policy.Z)
        yield CounterMetricFamily("sluice_scheduler_slots", SERIES["sluice_scheduler_slots_total"],
                                  value=svc.ticks)


def metrics_text(service: Callable) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ServiceCollector(service))
    return generate_latest(registry).decode()
