"""The hint each progress report's answer carries (controller/report_hints.py), from the
controller's state: the active rule, the incremental ranker the last reconcile left, the
job's known batches and the allowances its other workers still hold."""

from __future__ import annotations

from sluice_common import rank_rules
from controller.rank_delta import JobRanker
from controller.reconcile import Reconciler
from controller.registry import Job
from controller.report_hints import Hint, order_threshold, own_threshold, worker_hint
from controller.state import Shared

FRESH = 2      # the first FRESH * levels places of the order keep the staleness bound


class Hints:
    def __init__(self, shared: Shared, reconciler: Reconciler) -> None:
        self.s, self.reconciler = shared, reconciler

    def of(self, job_id: str, worker: str) -> Hint | None:
        """The hint for ``worker`` of ``job_id`` (None: hints are off, or the job is gone).
        Callers hold the shared lock and the report lock (batches and ranker stay put)."""
        cfg = self.s.config
        job = self.s.registry.jobs.get(job_id)
        if not cfg.report_hints or job is None:
            return None
        rule, levels = rank_rules.rule(self.s.rank), cfg.levels
        if rule.shape == rank_rules.FLOW:
            return Hint(None, cfg.report_staleness_s)
        load = self.reconciler.job_load(job)
        if rule.shape == rank_rules.ORDER:
            ranker = self.reconciler.ranker
            if not isinstance(ranker, JobRanker) or ranker.rule != rule \
                    or job_id not in ranker.levels:
                return Hint(None, cfg.report_staleness_s)   # no ranker yet: staleness only
            within = _staleness(ranker.position(job_id), levels, cfg)
            threshold = order_threshold(load, ranker.ahead_key(job_id), rule.key)
        else:
            within = cfg.report_heartbeat_s
            threshold = own_threshold(load, levels, cfg.attained_base_bytes,
                                      cfg.attained_factor, rule.level_of)
        hint = worker_hint(job.batch_of(worker), threshold, load.done_batches,
                           len(job.workers), _others_allowance(job, worker), within)
        job.report_at[worker] = hint.batch
        return hint


def _staleness(position: int, levels: int, cfg) -> float:
    """``ORDER`` rules (``remaining``): how stale the job at ``position`` may get.
    Others' thresholds are measured against the jobs with a level of their own and the next in line; a job
    moves up the order without reporting only when a job ahead of it leaves (one place
    a removal), so the first ``FRESH * levels`` places keep the staleness bound and the
    places after it a bound that grows with the square of the distance: the reports of
    the whole tail add up to about as many as those of the first places, however many
    jobs there are, and a job deep in the order is fresh again long before enough
    jobs ahead of it have left. Never longer than the heartbeat."""
    scale = max(1.0, (position + 1) / (FRESH * levels)) ** 2
    return min(cfg.report_heartbeat_s, cfg.report_staleness_s * scale)


def _others_allowance(job: Job, worker: str) -> int:
    """Done batches the job's other workers may still add without reporting: up to one
    batch short of the batch their last answer told them to report at."""
    total = 0
    for other, at in job.report_at.items():
        if other != worker and at is not None:
            total += max(0, at - 1 - max(1, job.batch_of(other)))
    return total
