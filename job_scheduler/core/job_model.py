"""What every scheduling loop keeps of a job: its estimator figures (:class:`JobModel`)
and, while it holds GPUs, its run (:class:`Run`); and what every loop prices alike
(:class:`Pricing`). The simulator (:mod:`job_scheduler.simulation.simulator`) and the
live view of the loops that do not simulate time (:mod:`job_scheduler.core.live_view`)
share them.
"""

from __future__ import annotations

import math
from typing import Callable

from job_scheduler.core.estimator import OWN_KEYS, OWN_WINDOW, Estimator, exchange_path
from job_scheduler.core.placement import BestFitPlacement
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.priority_pricing import Candidate, LinkSharer, priced_bandwidth
from sluice_common.jobspec import JobSpec


class JobModel:
    """Per-job cache of the estimator's figures: Cost(1), Cost(n) and the
    communication time at 1 Mbit/s (eq. 5 is exactly proportional to 1/bw).

    Trace jobs (``trace_gpus``/``trace_duration``): the trace's duration was measured on
    the job's own placement, not with every worker owning a full host link. So the work
    is calibrated such that ``C(trace_gpus)`` on the placement the job gets on an empty
    cluster (``reference_bw``, ``reference_path``, best fit) equals the trace duration; a
    fixed-count policy on an idle fabric then reproduces the trace, and sharing or another
    n rescales it."""

    __slots__ = ("spec", "cost1", "_cost", "_comm_unit", "_est", "_factor", "_round_unit",
                 "_one", "one_way")

    def __init__(self, spec: JobSpec, estimator: Estimator,
                 reference_bw: Callable[[int], float] | None = None,
                 reference_path: Callable[[int], tuple[float, ...] | None] | None = None):
        self.spec = spec
        self._est = estimator
        self._cost: dict[int, float] = {}
        self._comm_unit: dict[int, float] = {}
        self._round_unit: dict[int, float] = {}
        self._factor = 1.0
        # the fewest workers that exchange: 2, or 1 for a job that trains through its PS
        # on one GPU too (Estimator.exchanges_alone)
        self._one = 1 if estimator.exchanges_alone(spec) else 2
        self.one_way = estimator.one_way_share(spec)
        g = spec.trace_gpus
        if g and spec.trace_duration and reference_bw is not None:
            path = reference_path(g) if reference_path is not None else None
            self._factor = spec.trace_duration / self.C(g, reference_bw(g), path)
            self._cost.clear()            # filled at factor 1 by the line above
            self._comm_unit.clear()
        self.cost1 = self.cost(1)

    def cost(self, n: int, path: tuple[float, ...] | None = None) -> float:
        """Cost(n), with the exchange's fixed time per batch over ``path`` (the
        placement's ``exchange_path``; None: a cross-rack one) under an exchange pricing."""
        key = (n, path if self._est.exchange is not None else None)
        c = self._cost.get(key)
        if c is None:
            c = self._cost[key] = self._est.cost(self.spec, n, key[1]) * self._factor
        return c

    def comm(self, n: int, bw: float) -> float:
        if n < self._one or math.isinf(bw):
            return 0.0
        u = self._comm_unit.get(n)
        if u is None:
            u = self._comm_unit[n] = self._est.comm(self.spec, n, 1.0) * self._factor
        return u / bw

    def C(self, n: int, bw: float, path: tuple[float, ...] | None = None) -> float:
        return self.cost(n, path) + self.comm(n, bw)

    def queueing(self, n: int, round_wait_s: float) -> float:
        """Seconds the whole job waits in shared queues when each of its message rounds
        waits ``round_wait_s`` (the estimator's exchange pricing: rounds per batch times
        batches; 0 without one, or on one GPU unless the job exchanges alone)."""
        if n < self._one or not round_wait_s or self._est.exchange is None:
            return 0.0
        u = self._round_unit.get(n)
        if u is None:
            extra = self.spec.extra
            rounds = self._est.exchange.rounds(self._est.batch_bytes(self.spec),
                                               extra.get(OWN_KEYS), extra.get(OWN_WINDOW))
            u = self._round_unit[n] = self._est.iterations(self.spec, n) * rounds * self._factor
        return u * round_wait_s


class Run:
    """A job while it holds GPUs: what a policy or mechanism reads of it (``n``,
    ``placement``, ``bw``, ``rate`` = work per second, ``t_last`` = when its progress was
    last brought up to date, after a restore: when it trains again), in every loop."""
    __slots__ = ("j", "n", "placement", "flows", "base_bw", "bw", "work_left", "rate", "t_last",
                 "round_wait")

    def __init__(self, j, n, placement, flows, base_bw, work_left):
        self.j, self.n, self.placement, self.flows = j, n, placement, flows
        self.base_bw, self.work_left = base_bw, work_left
        self.bw = base_bw
        self.round_wait = 0.0        # seconds a message round queues (exchange pricing)
        self.rate = 0.0
        self.t_last = 0.0


class Pricing:
    """What the simulator and a ``live_view.LiveView`` price alike, from their
    ``topology``, ``base_bandwidth``, ``costs`` and ``_reference_bw`` memo; with
    priority, from their ``running`` jobs, ``uplink_cap``, ``link_users(r)`` and
    ``remaining(j)`` too."""

    def priority_bandwidth(self, placement, j: int, rule: str | None) -> float:
        """Mbit/s job ``j`` would get on ``placement`` now when the uplinks run strict
        priority by ``rule`` (None: the fair share), with the running jobs
        (:func:`job_scheduler.core.priority_pricing.priced_bandwidth`)."""
        cand = Candidate(j, self.jobs[j], self.remaining(j), max(len(placement.ps_hosts), 1),
                         self.base_bandwidth(placement), self.placement_flows(placement))
        return priced_bandwidth(cand, rule, self.uplink_cap, self.link_users,
                                self.link_sharer, self.rule_load, self.estimator)

    def exchange_path(self, placement) -> tuple[float, ...] | None:
        """The placement's path for the exchange's fixed time per batch
        (:func:`job_scheduler.core.estimator.exchange_path`); None without an exchange
        pricing (nothing to price)."""
        if self.estimator.exchange is None:
            return None
        key = (tuple(placement.ps_hosts), tuple(placement.worker_hosts))
        memo = self.__dict__.setdefault("_exchange_paths", {})     # per placement shape
        if key not in memo:
            memo[key] = exchange_path(self.topology, *key)
        return memo[key]

    def link_sharer(self, k: int, r: int, level: int) -> LinkSharer:
        """Running job ``k`` on uplink ``r`` at ``level``, for the strict-priority model."""
        run, model = self.running[k], self.models[k]
        return LinkSharer(level, run.flows[r], max(len(run.placement.ps_hosts), 1),
                          self.base_bandwidth(run.placement),
                          lambda bw: model.comm(run.n, bw),
                          model.cost(run.n, self.exchange_path(run.placement)))

    def rule_load(self, k: int) -> tuple[int, JobSpec, float]:
        """What a ranking rule reads of job ``k``: (key, spec, fraction of work left)."""
        return (k, self.jobs[k], self.remaining(k))

    def reference_bandwidth(self, n: int) -> float:
        """Bandwidth of an n-GPU job best-fit placed on the empty cluster."""
        bw = self._reference_bw.get(n)
        if bw is None:
            p = self._reference_placement(n)
            bw = self._reference_bw[n] = self.base_bandwidth(p) if p else math.inf
        return bw

    def reference_path(self, n: int) -> tuple[float, ...] | None:
        """The exchange path of that placement (``exchange_path``; None without one)."""
        memo = self.__dict__.setdefault("_reference_paths", {})
        if n not in memo:
            p = self._reference_placement(n)
            memo[n] = self.exchange_path(p) if p else None
        return memo[n]

    def _reference_placement(self, n: int):
        empty = ClusterState(self.topology)
        return BestFitPlacement().place(empty, "reference", min(n, empty.total_gpus))

    def cost_of(self, j: int, gpus: int) -> float:
        """Suspend + resume seconds of job j on ``gpus`` under the cost table (0: none)."""
        return self.costs.total(self.jobs[j].model, gpus) if self.costs else 0.0
