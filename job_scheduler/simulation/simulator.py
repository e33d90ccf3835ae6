"""Trace-driven discrete-event simulator: one engine for every scheduling policy.

Events: arrivals (a pointer into the arrival-sorted job list, not heap entries),
completions (a heapq, lazily invalidated by a per-job version number) and scheduling
slots. A policy acts at slot boundaries (``slot`` seconds); the engine skips straight to
the next event when nothing is waiting, or when the policy says nothing can change
before the next event — it never ticks second by second.

A running job advances through its work at rate ``1 / (Cost(n) + Comm(n, bw))``; ``bw``
is the placement's effective bandwidth (``estimator.effective_bandwidth``, memoised
per placement shape) capped by the job's fair share of every rack uplink it crosses
(each worker<->PS pair crossing a rack boundary is one flow; a rack uplink's capacity,
the sum of its ToR's switch links, is shared equally among its flows). When the set of
flows on an uplink changes, only the jobs crossing that uplink are re-timed.
Cross-domain links beyond the rack uplinks are not modelled as shared (documented
simplification; the ToR uplinks are where the oversubscription sits in our topologies).
With ``priority`` (a rule of ``sluice_common.rank_rules``: ``remaining``, ``attained``,
``progress``) the uplinks are strict-priority, as the fabric's switches are when the
controller ranks jobs: on each uplink the running jobs crossing it are put in the rule's
levels (the controller's own functions, on the simulator's remaining and attained bytes),
and level by level each gets, per flow, an equal share of what the levels before it left,
``left_k = cap - sum_{i in levels < k} f_i * d_i``, where ``d_i = min(share, base_i / nps_i)
* Comm_i / C_i`` is what a flow of job ``i`` really uses: its rate while it communicates,
times the share of its iteration spent communicating (the model is
:mod:`job_scheduler.core.priority_pricing`'s). Levels on an uplink are recomputed whenever a
job crossing it starts or stops (not as jobs progress between those events). A policy's look at a
placement it has not started (``live_bandwidth``) stays the fair share, unless it prices
with the fabric's priority (``priority_bandwidth``, the sluice policy's
``price_priority``): the same model, with the job ranked among the running ones.
With the estimator's exchange pricing (``Estimator(exchange=...)``,
:mod:`job_scheduler.core.exchange_pricing`) each batch also pays the exchange's fixed
time (in the estimator) and, at every rack uplink the job crosses, each message round
waits the queue that the jobs of its priority class and the more urgent ones keep there
(:func:`sluice_common.exchange_waits.fifo_round_wait_s`; all of them with priority off): the same
formula as the exchange model's fixed point, fed with the simulator's own shares
(``_round_wait``), and recomputed when the job is re-timed. A batch's round carries
the job's window of keys (``ExchangePricing.window_bytes``), which under a pricing with
``bulk_backlog_bytes`` makes a bulk flow's round wait the senders' whole backlog (its
module doc); a start-up's rounds are control messages.
Exchange between a PS and workers on one host is charged at the host's bus
(``Estimator.bus_mbps``: ``intra_bw``, or the exchange pricing's, the emulated fabric's
loopback; shared by the job's flows on that host; ``in_host=False`` makes it
free), and the fixed exchange time per batch over the placement's own
path (``exchange_path``) under an exchange pricing. ``network=False`` is the ideal fabric: no communication time at all.
A job that trains through its PS on one GPU too (``Estimator.exchanges_alone``: it states
its own batch) and whose lone worker's PS is on another host crosses the links between
them as any worker-PS pair does; a lone worker with its PS on its own host costs nothing.
``startup=True`` (with an exchange pricing): a job's first start holds its GPUs, without
progress, for the exchange model's start-up (``ExchangePricing.startup_s``) at the round
wait it meets then; while it holds, it sends nothing the others share with (their
senders, queues and priority levels leave it out), and at the first slot after the hold
the jobs on its uplinks are re-timed (``kv.init``'s exchange is a job's first batch, its
own to state). ``startup_alone_s``: that start-up's part a job pays alone (launch and
close) where it was measured on the runs being modelled (``ps_runtime.calibration``:
the demo's fabric), in place of the exchange constants' own; the close is held at the
start too (the same JCT and GPU-seconds as at the end).
``share="senders"`` (with an exchange pricing): a level's rate on an uplink is split among
the senders busy at once, not the flows: a flow gets ``left / (its flows + sum_i flows_i *
rho_i)`` over the others ``i`` of its level, ``rho_i`` the share of its iteration job ``i``
sends one way (queueing and compute included, as ``_round_wait`` counts it): the
exchange model's processor sharing (``sluice_common.exchange.egress_state``), where a job
waiting in a queue or computing leaves the link to the others. Each event re-times every
job on the uplinks it touches. ``share="flows"`` (the default) is the equal split above.
``attained_thresholds`` (with ``priority="attained"``): the levels are PIAS's, each
job's attained bytes per connection against explicit demotion thresholds (the hosts tag
them, as the fabric's ``pias`` baseline does) in place of the rule's geometric ones.
``rerank=True`` (with ``priority``): the levels are also recomputed at every slot while
jobs run, as the controller re-ranks jobs while their batches are reported (a rule whose
order moves with progress, ``progress`` above all, is otherwise frozen between starts and
stops).

Each slot's decisions come from ``decisions.decide_slot`` (the loop body of every loop),
carried out as they are taken, with the mechanisms composed in ``mechanisms``; a
suspension costs what ``costs`` says (``preemption.PreemptionCosts``; None: what the
asker says), paid as seconds without progress, GPUs held, when the job starts again.

Two instruments ride along, at a few float operations per re-timing (``SimResult``):
``exchange_share``, the share of all jobs' running time spent exchanging (each job's
``1 - Cost(n) / (C(n) + queueing)`` at its current rate, weighted by the seconds it runs
at it), and ``uplink_time``, the rack uplinks' utilisation over time: an uplink's
utilisation is what its flows carry, ``sum_i flows_i * bw_i / nps_i * Comm_i * rate_i``
(each flow's rate while its job exchanges times the share of the job's time spent
exchanging), over the uplink's capacity, capped at 1; it is piecewise constant between
the events that re-time a job crossing it, and ``uplink_time[k]`` holds the
uplink-seconds, summed over every uplink from the first arrival to the last end, spent
at a utilisation in bin ``k`` (:data:`UTIL_BINS`: bin 0 is exactly idle, bin ``k >= 1``
is ``((k - 1) / (UTIL_BINS - 1), k / (UTIL_BINS - 1)]``).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from job_scheduler.core.decisions import (BANDWIDTH_MODELS, SlotPlan, StartDecision, Suspend,
                                          decide_slot)
from job_scheduler.core.estimator import OWN_KEYS, OWN_WINDOW, Estimator, effective_bandwidth
from job_scheduler.core.job_model import JobModel, Pricing, Run
from job_scheduler.simulation.collector import rare_collections
from job_scheduler.simulation.job_records import host_spans, job_records
from job_scheduler.simulation.send_shares import SendShares, direct_sums
from job_scheduler.core.mechanisms import shared_gpus, stopped
from job_scheduler.core.priority_pricing import (LinkSharer, placement_flows, rank_item,
                                                 rank_levels, rule_size, sized_load,
                                                 uplink_capacities)
from sluice_common import rank_rules
from sluice_common.jobspec import JobSpec
from sluice_common.placement import Placement
from job_scheduler.core.cluster_state import ClusterState
from topologies import Topology
from topologies.priority_classes import LEVELS

# bins of ``SimResult.uplink_time``: 0 = idle, then 1/1000-wide steps up to a full uplink
UTIL_BINS = 1001


SHARES = ("flows", "senders")      # how an uplink's level splits its rate (module doc)


@dataclass
class SimResult:
    policy: str
    jobs: int
    avg_jct: float
    median_jct: float
    p95_jct: float
    avg_wait: float
    makespan: float
    gpu_util: float
    jct: list[float] = field(repr=False, default_factory=list)
    gpus: list[int] = field(repr=False, default_factory=list)   # GPU count each job ran at
    trace: list[tuple[float, float, float]] = field(repr=False, default_factory=list)  # (t,Q,Z)
    decisions: int = 0
    # the arguments of ``job_records.job_records`` (the property below builds from them)
    record_args: tuple = field(repr=False, default=(), compare=False)
    # the instruments (module doc): running time spent exchanging, uplink-seconds per
    # utilisation bin (UTIL_BINS)
    exchange_share: float = 0.0
    uplink_time: list[float] = field(repr=False, default_factory=list)

    @functools.cached_property
    def job_records(self) -> list[dict]:
        """One record per job, in the workload's order (``job_records.job_records``),
        built on first read: a run read only for its figures never pays for a dict per job."""
        return job_records(*self.record_args) if self.record_args else []

    def host_spans(self) -> tuple[int, int]:
        """``job_records.host_spans`` of the jobs' last placements: (jobs on more than
        one host, of them across racks)."""
        return host_spans(self.record_args[0], self.record_args[2]) if self.record_args else (0, 0)

    def metrics(self) -> dict[str, float]:
        return {"avg_jct": self.avg_jct, "median_jct": self.median_jct, "p95_jct": self.p95_jct,
                "avg_wait": self.avg_wait, "makespan": self.makespan, "gpu_util": self.gpu_util,
                "jobs": self.jobs}


@dataclass
class _UplinkLevels:
    """One uplink's strict-priority figures at one version: its jobs (``on``, by key) and
    their ``level`` when the version began; the levels its sending jobs are at
    (``present``, ascending), the Mbit/s each is left by the more urgent ones (``lefts``;
    what is left past the last, which only a job holding at a level of its own reads, is
    worked out when first asked: ``Simulator._left_at``) and the sending flows at each
    (``counts``); and its sending jobs in its set's order as ``(job, level, run, flows
    there, servers)``."""
    ver: int
    on: list[int]
    level: dict[int, int]
    present: list[int]
    lefts: list[float]
    counts: dict[int, int]
    entries: list[tuple]
    pairs: list[tuple[int, int]]            # (job, level) of ``entries``
    at: dict[int, tuple[float, int]]        # a present level's (left, count): read most
    _before: dict[int, list[tuple]] = field(default_factory=dict)
    _split: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)
    _used: dict[int, float] = field(default_factory=dict)

    def before(self, level: int) -> list[tuple]:
        """``(job, run, flows there, servers)`` of the sending jobs more urgent than
        ``level``, in ``entries``' order."""
        got = self._before.get(level)
        if got is None:
            got = self._before[level] = [(e[0], e[2], e[3], e[4]) for e in self.entries
                                         if e[1] < level]
        return got

    def used_before(self, level: int, send: Sequence[float]) -> float:
        """The Mbit/s the sending jobs more urgent than ``level`` use of the uplink, each
        flow's rate times its job's send share (``send``, by job; < 0: not timed yet),
        kept until one of them is re-timed (:meth:`moved`)."""
        got = self._used.get(level)
        if got is None:
            got = 0.0
            for i, other, f, nps in self.before(level):
                rho = send[i]
                if rho >= 0:
                    got += f * other.bw / nps * rho
            self._used[level] = got
        return got

    def moved(self, j: int) -> None:
        """Job ``j``'s rate or send share changed: what the levels after its own were
        told the more urgent ones use is stale."""
        used = self._used
        if used:
            mine = self.level.get(j)
            if mine is not None and mine < LEVELS - 1:      # no level is after the last
                for k in [k for k in used if k > mine]:
                    del used[k]

    def split(self, level: int) -> tuple[list[int], list[int]]:
        """The sending jobs at ``level`` or more urgent, and those less urgent."""
        got = self._split.get(level)
        if got is None:
            got = self._split[level] = ([i for i, lvl in self.pairs if lvl <= level],
                                        [i for i, lvl in self.pairs if lvl > level])
        return got


class Simulator(Pricing):
    """Run one policy over one job list on one topology. A fresh Simulator per run."""

    def __init__(self, topology: Topology, jobs: Sequence[JobSpec], policy, *,
                 estimator: Estimator | None = None, slot: float = 1.0,
                 progress: Callable[[int, int], None] | None = None, network: bool = True,
                 in_host: bool = True, bandwidth: str = "shared", mechanisms: Sequence = (),
                 costs=None, on_plan: Callable[[float, SlotPlan], None] | None = None,
                 priority: str | None = None, startup: bool = False, share: str = "flows",
                 rerank: bool = False, startup_alone_s: float | None = None,
                 attained_thresholds: tuple[float, ...] | None = None):
        if not slot > 0:
            raise ValueError(f"slot must be > 0 seconds, got {slot}")
        if priority is not None and priority not in rank_rules.names():
            raise ValueError(f"priority must be one of {', '.join(rank_rules.names())} or None, "
                             f"got {priority!r}")
        self.priority = priority
        self._rule = rank_rules.rule(priority) if priority is not None else None
        if attained_thresholds is not None and (priority != "attained" or len(
                attained_thresholds) >= LEVELS or list(attained_thresholds) != sorted(
                attained_thresholds)):
            raise ValueError("attained_thresholds: increasing, fewer than the fabric's "
                             f"{LEVELS} levels, with priority 'attained' only")
        # PIAS: the hosts tag each connection by the bytes it has sent, at these thresholds
        self.attained_thresholds = attained_thresholds
        if startup and (estimator is None or estimator.exchange is None):
            raise ValueError("startup needs an estimator with an exchange pricing")
        self.startup = startup
        if startup_alone_s is not None and not startup_alone_s >= 0:
            raise ValueError(f"startup_alone_s must be >= 0 seconds, got {startup_alone_s}")
        self.startup_alone_s = startup_alone_s
        self._holding: dict[int, float] = {}        # job -> end of its start-up hold
        self._hold_ends: list[tuple[float, int]] = []
        if share not in SHARES or (share == "senders" and (estimator is None
                                                          or estimator.exchange is None)):
            raise ValueError(f"share must be one of {', '.join(SHARES)} (senders with an "
                             f"exchange pricing), got {share!r}")
        self.share = share
        self.rerank = rerank and priority is not None
        if bandwidth not in BANDWIDTH_MODELS:
            raise ValueError(f"bandwidth model must be one of {BANDWIDTH_MODELS}, got {bandwidth!r}")
        # the loop contract's bandwidth model (job_scheduler/core/decisions.py): "shared" caps a
        # placement by its share of the rack uplinks, "idle" gives it the fabric alone
        self.bandwidth = bandwidth
        self.topology = topology
        self.policy = policy
        self.slot = float(slot)
        self.estimator = estimator or Estimator()
        order = sorted(range(len(jobs)), key=lambda i: (jobs[i].arrival, i))
        self.jobs: list[JobSpec] = [jobs[i] for i in order]
        self.state = ClusterState(topology)
        # network=False: an ideal fabric (no communication time at all), the assumption
        # of the Tiresias simulator; used to check the engine against its figures.
        self.network = network
        self.in_host = in_host
        self._bw_memo: dict[tuple, float] = {}
        self._reference_bw: dict[int, float] = {}
        self.models = [JobModel(j, self.estimator, self.reference_bandwidth, self.reference_path)
                       for j in self.jobs]
        self.progress = progress
        self.now = 0.0
        # waiting jobs in arrival order (dict = ordered set with O(1) removal)
        self.waiting: dict[int, None] = {}
        self.running: dict[int, Run] = {}
        self.first_start = [math.nan] * len(self.jobs)
        self.finish = [math.nan] * len(self.jobs)
        self.work_left = [1.0] * len(self.jobs)      # kept across preemptions
        # seconds a preempted job spends restoring on its next start, holding its GPUs
        # without progress (``preempt(j, overhead_s)``; LAS is charged none)
        self.restart_overhead = [0.0] * len(self.jobs)
        self.preemptions = 0
        # a resumed job started on another GPU count than its last run (migration)
        self.grows = 0
        self.shrinks = 0
        self.ran_gpus = [0] * len(self.jobs)
        self.placements: list[Placement | None] = [None] * len(self.jobs)   # the last start's
        self.gpu_seconds = 0.0
        self.decisions = 0                           # GPU-count decisions taken
        self._heap: list[tuple[float, int, int]] = []   # (time, version, job)
        self._version = [0] * len(self.jobs)
        # rack uplinks: capacity (sum of the ToR's switch links) and live flow counts
        self.uplink_cap = uplink_capacities(topology)
        self.uplink_flows = [0] * len(topology.racks)
        self.uplink_jobs: list[set[int]] = [set() for _ in topology.racks]
        # _levels: one instant's answers, and each job's bytes then
        self._levels_at, self._levels_memo, self._loads_memo = math.nan, {}, {}
        # each uplink's version, moved on whenever its jobs or their holds change: what
        # the per-uplink figures below are kept by (``_uplink_levels``, ``_uplink_live``)
        self._uplink_ver = [0] * len(topology.racks)
        self._tables: dict[int, _UplinkLevels] = {}
        self._rule_sizes: list[tuple[int, int] | None] = [None] * len(self.jobs)
        self._live: dict[int, tuple[int, list[int]]] = {}
        # the instruments (module doc): seconds run and spent exchanging over all jobs;
        # each job's current share of time exchanging and rate per flow on an uplink
        # (Mbit/s, averaged over its iteration); each uplink's carried rate and when it
        # last changed; uplink-seconds per utilisation bin
        self.run_s = 0.0
        self.exchange_s = 0.0
        self._exch = [0.0] * len(self.jobs)
        self._flow_use = [0.0] * len(self.jobs)
        # each running job's one-way send share ``rho`` at its current rate (set when it
        # is re-timed, -1 before its first timing): what the others' queue waits and the
        # senders' share read of it, read far more often than it changes
        self._send = [-1.0] * len(self.jobs)
        # each uplink's senders' shares kept summed (``_shares``), by uplink version
        self._send_sums: dict[int, tuple[int, SendShares]] = {}
        self._run_cost: dict[int, tuple[Run, float]] = {}              # _retime's
        self._sharers: dict[tuple[int, int], tuple[Run, object]] = {}   # _sharer's
        self._in_flight_memo: dict[tuple[int, int], float] = {}         # _in_flight's
        # What a re-timing reads of the estimator's exchange pricing, fixed for a run:
        # its FIFO wait with the constants bound, and _retime's one pass over a job's
        # uplinks where each level's rate is split per flow and the rounds wait on the
        # kept sums (``ExchangePricing.waits_on_sums``, the same for every job where no
        # round is priced by its bytes in flight); the class's function, not a bound
        # method, so that no cycle runs through the simulator.
        exchange = self.estimator.exchange
        self._wait_of_sums = (exchange.round_wait_of_sums_fn() if exchange is not None
                              else None)
        self._one_pass = None
        if self.share == "flows" and exchange is not None:
            kind = type(self)
            self._one_pass = (kind._priority_timing if self.priority else
                              kind._fair_timing if self.bandwidth == "shared" else None)
        self._sums_always = (exchange is not None and exchange.bulk_backlog_bytes is None
                             and exchange.waits_on_sums(None))
        self.uplink_used = [0.0] * len(topology.racks)
        self._uplink_since = [0.0] * len(topology.racks)
        self.uplink_time = [0.0] * UTIL_BINS
        # a policy that leaves jobs waiting on an idle cluster this long is broken
        self.max_stalled_slots = 1_000_000
        self.mechanisms = tuple(mechanisms)
        for m in self.mechanisms:
            m.check(self, policy)
        self.costs = costs              # None: a suspension costs what its asker says
        self.charged_s = 0.0            # seconds of suspend/resume charged in all
        self.counts: Counter = Counter()   # suspensions by why but the policy's, packings
        self.plan = SlotPlan()          # what is being decided (decisions.decide_slot)
        self.on_plan = on_plan          # told each non-empty plan: (time, plan)

    # ---- facts policies use ---------------------------------------------------------
    def placement_flows(self, placement: Placement) -> dict[int, int]:
        """Rack uplink -> number of this job's worker<->PS flows crossing it."""
        return placement_flows(self.state, placement)

    def link_users(self, r: int) -> set[int]:
        """The running jobs whose flows cross rack uplink ``r``."""
        return self.uplink_jobs[r]

    def base_bandwidth(self, placement: Placement) -> float:
        """The placement's bandwidth with the fabric to itself (memoised)."""
        workers = placement.worker_hosts
        if not self.network or (len(workers) <= 1
                                and all(h in workers for h in placement.ps_hosts)):
            return math.inf          # Comm(1) = 0 whatever the bandwidth (module doc)
        key = (placement.ps_hosts, placement.worker_hosts)
        bw = self._bw_memo.get(key)
        if bw is None:
            bw = self._bw_memo[key] = effective_bandwidth(
                self.topology, placement.ps_hosts, placement.worker_hosts, self.in_host,
                self.estimator.bus_mbps)
        return bw

    def live_bandwidth(self, placement: Placement, flows: dict[int, int] | None = None,
                       base: float | None = None, joining: bool = True) -> float:
        """Bandwidth the placement would get now, with the uplinks' other flows."""
        base = self.base_bandwidth(placement) if base is None else base
        if math.isinf(base) or self.bandwidth == "idle":
            return base
        flows = self.placement_flows(placement) if flows is None else flows
        bw = base
        nps = max(len(placement.ps_hosts), 1)
        for r, f in flows.items():
            total = self.uplink_flows[r] + (f if joining else 0)
            if total > 0:
                bw = min(bw, nps * self.uplink_cap[r] / total)
        return bw

    def remaining(self, j: int) -> float:
        """Fraction of job j's work still to do, now (1 before it starts)."""
        run = self.running.get(j)
        if run is None:
            return self.work_left[j]
        return max(run.work_left - max(self.now - run.t_last, 0.0) * run.rate, 0.0)

    # ---- actions policies take ------------------------------------------------------
    def start(self, j: int, placement: Placement) -> None:
        n = placement.gpus
        prev = self.ran_gpus[j]          # > 0: a resume (start is only called on waiting jobs)
        if prev and n != prev:
            self.grows += n > prev
            self.shrinks += n < prev
            if self.costs and self.restart_overhead[j] > 0:
                # resumed on another GPU count: the resume part is that count's
                model = self.jobs[j].model
                delta = (self.costs.suspend_resume(model, n)[1]
                         - self.costs.suspend_resume(model, prev)[1])
                self.restart_overhead[j] = max(self.restart_overhead[j] + delta, 0.0)
                self.charged_s += delta
        ids = (self.state.allocate(placement)     # a packed guest takes none
               if all(m.holds_gpus(j) for m in self.mechanisms) else shared_gpus(self, j))
        del self.waiting[j]
        flows = self.placement_flows(placement)
        run = Run(j, n, placement, flows, self.base_bandwidth(placement), self.work_left[j])
        self._send[j] = -1.0             # not timed yet: sends nothing the others wait behind
        # a resumed job first restores its checkpoint: no progress until t_last
        overhead, self.restart_overhead[j] = self.restart_overhead[j], 0.0
        run.t_last = self.now + overhead
        self.gpu_seconds += overhead * n
        self.running[j] = run
        first = math.isnan(self.first_start[j])
        if first:
            self.first_start[j] = self.now
        self.ran_gpus[j] = n
        self.placements[j] = placement
        affected = self._add_flows(flows, j, +1)
        if self.startup and first:
            hold = self.estimator.exchange.startup_s(self._round_wait(run, sparse=True),
                                                     self.priority is not None,
                                                     self.startup_alone_s)
            run.t_last += hold
            self.gpu_seconds += hold * n
            self._holding[j] = run.t_last
            heapq.heappush(self._hold_ends, (run.t_last, j))
            self._touch(flows)
        self._retime(run)
        for k in affected:
            if k != j:
                self._retime(self.running[k])
        self.plan.steps.append(StartDecision(j, placement, ids))
        for m in self.mechanisms:
            m.on_start(self, j)

    def preempt(self, j: int, overhead_s: float = 0.0, why: str = "policy") -> None:
        """Stop a running job, keeping its progress; it waits again. ``overhead_s``:
        the suspend/resume cost the asker names, paid as that many seconds without
        progress (GPUs held) when the job starts again; a cost table, when the
        simulator has one, names it instead. ``why``: the policy, ``time-slice`` or
        ``migrate`` (counted apart)."""
        run = self.running.pop(j)
        self._holding.pop(j, None)
        cost = overhead_s if self.costs is None else self.costs.total(self.jobs[j].model, run.n)
        if why == "policy":
            self.preemptions += 1
        else:
            self.counts[why] += 1
        self.charged_s += cost
        self.restart_overhead[j] += cost
        self.plan.steps.append(Suspend(j, cost, why))
        self._advance(run)
        self.work_left[j] = run.work_left
        self._version[j] += 1
        self._release(j, run)
        self.waiting[j] = None

    def retime(self, j: int) -> None:
        """Job j's speed changed (a mechanism packed or unpacked it): re-time it."""
        self._retime(self.running[j], force=True)

    # ---- internals ------------------------------------------------------------------
    def _release(self, j: int, run: Run) -> None:
        """Job j stopped: its GPUs go free, its flows leave the uplinks (the jobs that
        shared them are re-timed)."""
        if not stopped(self.mechanisms, self, j):    # else a packed partner keeps them
            self.state.release(run.placement)
        self._exch[j] = 0.0
        self._send[j] = -1.0
        for r in run.flows:
            self._sharers.pop((j, r), None)
        self._use_uplinks(j, run.flows, 0.0)
        for k in self._add_flows(run.flows, j, -1):
            self._retime(self.running[k])

    def _add_flows(self, flows: dict[int, int], j: int, sign: int) -> set[int]:
        affected: set[int] = set()
        self._touch(flows)
        for r, f in flows.items():
            self.uplink_flows[r] += sign * f
            if sign > 0:
                self.uplink_jobs[r].add(j)
            else:
                self.uplink_jobs[r].discard(j)
            affected |= self.uplink_jobs[r]
        # A job's level, share and queue wait on an uplink depend only on the jobs that
        # cross that uplink, so priority re-times just those; the senders' share counts
        # who is busy at once across the fabric, so it re-times every job on an uplink.
        if self.share == "senders":
            affected = set().union(*self.uplink_jobs) - {j}
        return affected

    def _touch(self, flows: dict[int, int]) -> None:
        """The jobs or holds on these uplinks change: their kept figures are stale."""
        ver = self._uplink_ver
        for r in flows:
            ver[r] += 1

    def _uplink_live(self, r: int) -> list[int]:
        """The running jobs on uplink ``r`` that send (not holding), in the order its set
        of users iterates (the order the queue waits sum them in), kept per version."""
        got = self._live.get(r)
        if got is not None and got[0] == self._uplink_ver[r]:
            return got[1]
        running, holding = self.running, self._holding
        live = [i for i in self.uplink_jobs[r] if i in running and i not in holding]
        self._live[r] = (self._uplink_ver[r], live)
        return live

    def _uplink_levels(self, r: int) -> "_UplinkLevels":
        """Uplink ``r``'s strict-priority figures now (``_UplinkLevels``): what every
        job re-timed reads of it, worked out once per version. The levels are ranked when
        the version begins, that is when a job crossing the uplink starts, stops or ends
        its start-up hold (or, with ``rerank``, at every slot), and stand until then
        (module doc): a job re-timed for an event on another of its uplinks reads these
        as they are."""
        ver = self._uplink_ver[r]
        got = self._tables.get(r)
        if got is not None and got.ver == ver:
            return got
        on = sorted(self.uplink_jobs[r])
        level = self._levels(on)
        holding, running = self._holding, self.running
        by_level: dict[int, list[int]] = {}         # the senders at each level, by key
        for i in on:
            if i not in holding:
                by_level.setdefault(level[i], []).append(i)
        present = sorted(by_level)
        cap = self.uplink_cap[r]
        # class_capacity's loop, once for every level: the Mbit/s each level is left by
        # the ones before it and the sending flows at it; a job's own level is priced on
        # the others at and before it only, the same for every job at that level
        left, lefts, counts = cap, [], {}
        for k in present:
            here = by_level[k]
            count = 0
            for i in here:
                count += running[i].flows[r]
            lefts.append(left)
            counts[k] = count
            if k == present[-1]:
                break               # what the last level leaves: _left_at, when asked
            share = left / count if count else left
            for i in here:
                left -= self._sharer(i, r, k).used(share)
            left = max(left, 1e-9 * cap)
        if not present:
            lefts.append(left)
        entries = []
        for i in self._uplink_live(r):
            other = running[i]
            entries.append((i, level[i], other, other.flows[r],
                            max(len(other.placement.ps_hosts), 1)))
        got = self._tables[r] = _UplinkLevels(ver, on, level, present, lefts, counts,
                                              entries, [(e[0], e[1]) for e in entries],
                                              {k: (lefts[n], counts[k])
                                               for n, k in enumerate(present)})
        return got

    def _levels(self, jobs: Sequence[int]) -> dict[int, int]:
        """Each job's level under the priority rule, on its bytes now
        (:func:`~job_scheduler.core.priority_pricing.rule_levels`)."""
        # Every job re-timed at one instant asks for the levels of the same uplinks; the
        # rule reads only the jobs' bytes at ``now``, so one answer serves them all.
        # A job's bytes are the same all that instant too: read once, whichever uplinks ask.
        if self._levels_at != self.now:
            self._levels_at, self._levels_memo, self._loads_memo = self.now, {}, {}
        key = tuple(jobs)
        got = self._levels_memo.get(key)
        if got is None:
            sizes, memo, loads = self._rule_sizes, self._loads_memo, []
            for j in jobs:
                load = memo.get(j)
                if load is None:
                    size = sizes[j]
                    if size is None:
                        size = sizes[j] = rule_size(self.jobs[j], self.estimator)
                    load = memo[j] = rank_item(self._rule, sized_load(
                        j, size[0], size[1], self.remaining(j), self.jobs[j].arrival))
                loads.append(load)
            got = self._levels_memo[key] = rank_levels(self._rule, loads,
                                                        self.attained_thresholds)
        return got

    def _left_at(self, r: int, table: _UplinkLevels, level: int) -> float:
        """The Mbit/s the levels more urgent than ``level`` leave on uplink ``r``
        (``table``: its ``_uplink_levels``); past the last level, what that level leaves
        too, worked out once."""
        k = bisect.bisect_left(table.present, level)
        lefts = table.lefts
        if k == len(lefts):             # past the last level: its use comes off too
            last, cap = table.present[-1], self.uplink_cap[r]
            left = lefts[-1]
            count = table.counts[last]
            share = left / count if count else left
            holding, level_of = self._holding, table.level
            for i in [i for i in table.on if i not in holding and level_of[i] == last]:
                left -= self._sharer(i, r, last).used(share)
            lefts.append(max(left, 1e-9 * cap))
        return lefts[k]

    def _priority_bandwidth(self, run: Run, tables: dict[int, _UplinkLevels]) -> float:
        """The job's bandwidth under strict priority on the uplinks it crosses (module
        doc): its level's per-flow share of what the more urgent levels leave
        (``tables``: each uplink's ``_uplink_levels`` now)."""
        bw = run.base_bw
        nps = max(len(run.placement.ps_hosts), 1)
        holding = run.j in self._holding
        for r, f in run.flows.items():
            # class_capacity(cap, the other senders at or before the job's level, its
            # level, f): the less urgent levels take nothing from the job's
            table = tables[r]
            mine = table.level[run.j]
            k = bisect.bisect_left(table.present, mine)
            left = table.lefts[k] if k < len(table.lefts) else self._left_at(r, table, mine)
            flows = table.counts.get(mine, 0) + (f if holding else 0)
            if self.share == "senders":
                on, level = table.on, table.level
                flows = self._senders(run, r, [i for i in on if level[i] == mine])
            bw = min(bw, nps * (left / flows))
        return bw

    def _priority_timing(self, run: Run) -> tuple[float, float]:
        """``(_priority_bandwidth, _round_wait)`` of the job in one pass over its uplinks,
        where its rounds wait on the kept sums (``ExchangePricing.waits_on_sums``) and
        each level's rate is split per flow: the same figures by the same floating-point
        operations, for the re-timing a simulation of a full cluster spends its time in."""
        j, send = run.j, self._send
        bw, total = run.base_bw, 0.0
        nps = max(len(run.placement.ps_hosts), 1)
        holding = j in self._holding
        tables, ver, sums = self._tables, self._uplink_ver, self._send_sums
        min_share, caps = self.estimator.exchange.constants.min_share, self.uplink_cap
        wait_of_sums = self._wait_of_sums
        # What this reads of an uplink's kept figures is read here where it is kept
        # (``_UplinkLevels.used_before``, ``split``, ``_shares``: the method works it out
        # where it is not); ``min`` and ``max`` are written out as the comparisons they
        # make. The bandwidth as ``_priority_bandwidth``, the sums as ``_ahead_sums``.
        for r, f in run.flows.items():
            v = ver[r]
            table = tables.get(r)
            if table is None or table.ver != v:
                table = self._uplink_levels(r)
            mine, present = table.level[j], table.present
            got = table.at.get(mine)
            if got is not None:
                left, count = got
            else:                           # holding at a level no sender is at
                k = bisect.bisect_left(present, mine)
                left = table.lefts[k] if k < len(table.lefts) else self._left_at(r, table, mine)
                count = 0
            flow_bw = nps * (left / (count + (f if holding else 0)))
            if flow_bw < bw:                                    # min(bw, flow_bw)
                bw = flow_bw
            out = (j,)                      # the senders left out of the kept sums
            if present and mine < present[-1]:
                split = table._split.get(mine)
                upto, after = split if split is not None else table.split(mine)
                if len(upto) <= len(after) + 1:
                    busy, senders = direct_sums([send[i] for i in upto
                                                 if i != j and send[i] >= 0])
                    out = None
                else:
                    out = (j, *after)
            if out is not None:
                kept = sums.get(r)
                shares = kept[1] if kept is not None and kept[0] == v else self._shares(r)
                busy, senders = shares.without(out)
            used = table._used.get(mine)
            if used is None:
                used = table.used_before(mine, send)
            cap = caps[r]
            left, least = cap - used, min_share * cap
            total += wait_of_sums(busy, senders, least if least > left else left)   # max
        return bw, total

    def _fair_timing(self, run: Run) -> tuple[float, float]:
        """``(live_bandwidth, _round_wait)`` of the job in one pass over its uplinks with
        priority off, where each uplink's rate is split per flow and its rounds wait on
        the kept sums (every other sender there is ahead, in the uplink's whole rate):
        the same figures by the same floating-point operations, as ``_priority_timing``
        is for priority."""
        j, bw, total = run.j, run.base_bw, 0.0
        nps = max(len(run.placement.ps_hosts), 1)
        on, caps, ver, sums = self.uplink_flows, self.uplink_cap, self._uplink_ver, self._send_sums
        min_share = self.estimator.exchange.constants.min_share
        wait_of_sums, out = self._wait_of_sums, (j,)
        for r in run.flows:
            cap, flows = caps[r], on[r]
            if flows > 0:
                flow_bw = nps * cap / flows
                if flow_bw < bw:                                # min(bw, flow_bw)
                    bw = flow_bw
            kept = sums.get(r)
            shares = kept[1] if kept is not None and kept[0] == ver[r] else self._shares(r)
            busy, senders = shares.without(out)
            least = min_share * cap         # max(cap - 0.0, least): nothing is more urgent
            total += wait_of_sums(busy, senders, least if least > cap else cap)
        return bw, total

    def _sharer(self, k: int, r: int, level: int):
        """``link_sharer(k, r, level)``, kept while job ``k`` runs on the same placement
        (all it holds but the level is fixed for a run)."""
        run = self.running[k]
        got = self._sharers.get((k, r))
        if got is None or got[0] is not run:
            got = self._sharers[(k, r)] = (run, self.link_sharer(k, r, level))
        elif got[1].level != level:         # the same run at another level: the rest stands
            s = got[1]
            got = self._sharers[(k, r)] = (run, LinkSharer(level, s.flows, s.servers, s.base_bw,
                                                           s.comm_s, s.cost_s))
        return got[1]

    def _senders(self, run: Run, r: int, same: Sequence[int]) -> float:
        """The flows sending on uplink ``r`` at once with the job's own, among ``same``
        (``share="senders"``, module doc): its own flows and the others' times their
        send shares."""
        total = float(run.flows[r])
        for i in same:
            other = self.running.get(i)
            if i == run.j or other is None or other.rate <= 0 or i in self._holding:
                continue
            total += other.flows[r] * self._send[i]
        return total

    def _sender_bandwidth(self, run: Run) -> float:
        """The job's bandwidth with priority off under ``share="senders"``."""
        bw = run.base_bw
        nps = max(len(run.placement.ps_hosts), 1)
        for r in run.flows:
            bw = min(bw, nps * self.uplink_cap[r] / self._senders(run, r, self.uplink_jobs[r]))
        return bw

    def _ahead_sums(self, r: int, j: int, table: _UplinkLevels) -> tuple[float, float]:
        """``(busy, senders)`` of the timed senders job ``j`` waits behind on uplink ``r``
        under strict priority (``table``: its ``_uplink_levels``): its own level and the
        more urgent ones. From the kept sums with the job and the less urgent levels left
        out, or summed afresh where the senders ahead are the fewer."""
        mine, present = table.level[j], table.present
        if present and mine < present[-1]:
            upto, after = table.split(mine)
            if len(upto) <= len(after) + 1:
                send = self._send
                return direct_sums([send[i] for i in upto if i != j and send[i] >= 0])
            return self._shares(r).without((j, *after))
        return self._shares(r).without((j,))           # no sender is less urgent

    def _shares(self, r: int) -> SendShares:
        """Uplink ``r``'s senders (``_uplink_live``) that have been timed, their send
        shares kept summed; rebuilt when the uplink's version moves on, kept up to date as
        each is re-timed in between (``_retime``)."""
        ver = self._uplink_ver[r]
        got = self._send_sums.get(r)
        if got is None or got[0] != ver:
            send = self._send
            got = self._send_sums[r] = (ver, SendShares(
                (i, send[i]) for i in self._uplink_live(r) if send[i] >= 0))
        return got[1]

    def _round_wait(self, run: Run, sparse: bool = False,
                    tables: dict[int, _UplinkLevels] | None = None) -> float:
        """What one message round of the job waits in the rack uplinks' queues, summed
        over the uplinks it crosses (a cross-rack pair crosses its worker's and its
        server's): behind the other jobs there of its priority level and the more urgent
        ones, in what the more urgent levels leave (module doc). A job's share of one
        direction is its one-way share of its communicating time (push one way, pull the
        other: ``JobModel.one_way``, half when every key is pushed at once). With the
        pricing's ``waits="pair"`` a round waits the mean of its uplinks' waits
        (``ExchangePricing``'s module doc). A batch's round carries the job's window of
        keys (``ExchangePricing.window_bytes``: a flow with more than a burst in flight
        waits the senders' whole backlog, ``ExchangePricing.bulk_round``); ``sparse``: a
        start-up's control messages, on a connection with nothing else queued.
        ``tables``: each uplink's ``_uplink_levels`` now, when the caller has them.
        Where the wait reads only the busy share and the sum of the senders ahead
        (``ExchangePricing.waits_on_sums``) it takes them from the uplink's kept sums
        (``_shares``), leaving out the job and the less urgent levels, or sums the few
        ahead afresh when they are fewer than those left out."""
        pricing = self.estimator.exchange
        total = 0.0
        in_flight = None if sparse else self._in_flight(run)
        send, j = self._send, run.j
        if pricing.waits_on_sums(in_flight):
            min_share, caps = pricing.constants.min_share, self.uplink_cap
            for r in run.flows:
                used = 0.0
                if not self.priority:       # one class: every other sender is ahead
                    busy, senders = self._shares(r).without((j,))
                else:
                    table = tables[r] if tables is not None else self._uplink_levels(r)
                    busy, senders = self._ahead_sums(r, j, table)
                    used = table.used_before(table.level[j], send)
                cap = caps[r]
                left = max(cap - used, min_share * cap)
                total += pricing.round_wait_of_sums(busy, senders, left)
            return total
        for r in run.flows:
            urgent, used = [], 0.0
            if not self.priority:       # one class: every other sender is ahead
                # send[i] < 0: not yet timed (starting in this very event)
                ahead = [send[i] for i in self._uplink_live(r) if i != j and send[i] >= 0]
            else:
                table = self._uplink_levels(r)
                mine = table.level[j]
                ahead = [send[i] for i, lvl in table.pairs
                         if lvl <= mine and i != j and send[i] >= 0]
                for i, other, f, nps in table.before(mine):
                    rho = send[i]
                    if rho < 0:
                        continue
                    urgent.append(rho)
                    used += f * other.bw / nps * rho
            cap = self.uplink_cap[r]
            left = max(cap - used, pricing.constants.min_share * cap)
            total += pricing.round_wait_s(ahead, left, urgent, cap, in_flight)
        if pricing.waits == "pair" and run.flows:
            return total / len(run.flows)
        return total

    def _in_flight(self, run: Run) -> float | None:
        """The bytes one of the job's worker-server flows has in flight in a batch
        (``ExchangePricing.window_bytes``), kept per job and PS count; None where the
        pricing prices every round alike (no ``bulk_backlog_bytes``)."""
        pricing = self.estimator.exchange
        if pricing.bulk_backlog_bytes is None:
            return None
        servers = max(len(run.placement.ps_hosts), 1)
        key = (run.j, servers)
        got = self._in_flight_memo.get(key)
        if got is None:
            job = self.jobs[run.j]
            got = self._in_flight_memo[key] = pricing.window_bytes(
                self.estimator.batch_bytes(job), servers, job.extra.get(OWN_KEYS),
                job.extra.get(OWN_WINDOW))
        return got

    def _end_holds(self) -> None:
        """Start-up holds over by now: the job sends from now on, so every job on its
        uplinks is re-timed (``startup=True``, module doc)."""
        while self._hold_ends and self._hold_ends[0][0] <= self.now:
            _, j = heapq.heappop(self._hold_ends)
            if self._holding.pop(j, None) is None or j not in self.running:
                continue
            run = self.running[j]
            self._touch(run.flows)
            for k in set().union(*(self.uplink_jobs[r] for r in run.flows)) | {j}:
                if k in self.running:
                    self._retime(self.running[k], force=True)

    def _advance(self, run: Run) -> None:
        dt = self.now - run.t_last
        if dt > 0:
            left = run.work_left - dt * run.rate
            run.work_left = 0.0 if left < 0.0 else left       # max(left, 0.0)
            self.gpu_seconds += dt * run.n
            self.run_s += dt
            self.exchange_s += dt * self._exch[run.j]
            run.t_last = self.now

    def _use_uplinks(self, j: int, flows: dict[int, int], per_flow: float) -> None:
        """Job j's flows now carry ``per_flow`` Mbit/s each on average: the uplinks they
        cross close their current utilisation's stretch of time (module doc)."""
        old = self._flow_use[j]
        if per_flow == old:
            return
        self._flow_use[j] = per_flow
        now, top = self.now, UTIL_BINS - 1
        since, uplink_used = self._uplink_since, self.uplink_used
        for r, f in flows.items():
            used = uplink_used[r]
            # the jobs re-timed at one instant touch the same uplinks over and over: a
            # stretch of no time adds nothing to its bin (x + 0.0 == x), so it is not binned
            if now != since[r]:
                cap = self.uplink_cap[r]
                util = used / cap if used > 0 else 0.0
                k = max(1, min(math.ceil(util * top - 1e-9), top)) if util > 0 else 0
                self.uplink_time[k] += now - since[r]
                since[r] = now
            used += (per_flow - old) * f
            uplink_used[r] = used if self.uplink_flows[r] > 0 and used > 1e-9 else 0.0

    def _retime(self, run: Run, force: bool = False) -> None:
        """Bring the job to ``now`` at its old rate, then schedule its completion at
        the rate its current uplink sharing gives (``force``: its slowdown changed)."""
        self._advance(run)
        pricing = self.estimator.exchange
        one_pass = self._one_pass
        if one_pass is not None and (math.isinf(run.base_bw) or not (
                self._sums_always or pricing.waits_on_sums(self._in_flight(run)))):
            one_pass = None
        if one_pass is not None:
            bw, wait = one_pass(self, run)
        else:
            # every uplink's levels, read by both the bandwidth and the queue waits
            tables = ({r: self._uplink_levels(r) for r in run.flows} if self.priority
                      else None)
            if self.priority and not math.isinf(run.base_bw):
                bw = self._priority_bandwidth(run, tables)
            elif (self.share == "senders" and not math.isinf(run.base_bw)
                  and self.bandwidth != "idle"):
                bw = self._sender_bandwidth(run)
            else:
                bw = self.live_bandwidth(run.placement, run.flows, run.base_bw, joining=False)
            wait = self._round_wait(run, tables=tables) if pricing else 0.0
        if run.rate and bw == run.bw and wait == run.round_wait and not force:
            return
        run.bw, run.round_wait = bw, wait
        # a mechanism may slow it (packing: two jobs on one GPU)
        slowdown = math.prod(m.slowdown(run.j) for m in self.mechanisms) if self.mechanisms else 1
        model = self.models[run.j]
        kept = self._run_cost.get(run.j)
        if kept is None or kept[0] is not run:      # Cost(n) over its path: fixed for a run
            kept = self._run_cost[run.j] = (run, model.cost(run.n,
                                                            self.exchange_path(run.placement)))
        cost, comm = kept[1], model.comm(run.n, bw)   # C(n) = cost + comm
        iteration = cost + comm + model.queueing(run.n, wait)
        run.rate = 1.0 / (iteration * slowdown)
        rho = model.one_way * comm * run.rate
        rho = self._send[run.j] = rho if rho < 1.0 else 1.0      # min(1.0, rho)
        if run.j not in self._holding:      # a holding job is no uplink's sender
            sums, tables, ver = self._send_sums, self._tables, self._uplink_ver
            for r in run.flows:
                got = sums.get(r)
                if got is not None and got[0] == ver[r]:
                    got[1].set(run.j, rho)
                table = tables.get(r)
                if table is not None and table.ver == ver[r]:
                    table.moved(run.j)
        if iteration > 0:
            self._exch[run.j] = 1.0 - cost / iteration
        if run.flows:
            nps = max(len(run.placement.ps_hosts), 1)
            self._use_uplinks(run.j, run.flows, bw / nps * comm * run.rate)
        self._version[run.j] += 1
        heap, now, since = self._heap, self.now, run.t_last
        heapq.heappush(heap, ((since if since > now else now) + run.work_left / run.rate,
                              self._version[run.j], run.j))         # max(now, since)
        if len(heap) > 4 * len(self.running) + 1024:
            self._drop_stale_completions()

    def _complete(self, j: int, t: float) -> None:
        self.now = t
        run = self.running.pop(j)
        self._holding.pop(j, None)
        self._advance(run)
        self.finish[j] = t
        self.work_left[j] = 0.0
        self._release(j, run)
        self.policy.on_complete(self, j)
        for m in self.mechanisms:
            m.after_complete(self)            # e.g. migration onto the GPUs just freed

    def _drop_stale_completions(self) -> None:
        """Rebuild the completion heap from its live entries. Each re-timing leaves its
        job's last entry stale, and on a full cluster a job is re-timed tens of times:
        popped one by one, the stale entries cost a sift each on a heap mostly made of
        them. The entries popped next are the same: the smallest live ``(time, version,
        job)``, which no two live entries share (one per running job)."""
        running, version = self.running, self._version
        heap = self._heap = [e for e in self._heap if e[2] in running and version[e[2]] == e[1]]
        heapq.heapify(heap)

    def _next_completion(self) -> float:
        heap = self._heap
        while heap:
            t, v, j = heap[0]
            if j in self.running and self._version[j] == v:
                return t
            heapq.heappop(heap)
        return math.inf

    def _slot_at_or_after(self, t: float) -> float:
        if math.isinf(t):
            return t
        return math.ceil(t / self.slot - 1e-9) * self.slot

    # ---- the loop ---------------------------------------------------------------------
    def run(self) -> SimResult:
        # the loop allocates at nearly every step and frees by reference counting alone:
        # the cyclic collector's frequent passes are a tenth of a large run's CPU
        with rare_collections():
            return self._run()

    def _run(self) -> SimResult:
        jobs, n_jobs = self.jobs, len(self.jobs)
        if n_jobs == 0:
            return SimResult(self.policy.name, 0, *(0.0,) * 6)
        next_arrival = 0
        done = 0
        stalled = 0
        self.now = self._slot_at_or_after(jobs[0].arrival)
        self._uplink_since = [jobs[0].arrival] * len(self.uplink_cap)
        last_progress = 0.0
        while done < n_jobs:
            # completions up to now, in time order (each may re-time others)
            while True:
                t = self._next_completion()
                if t > self.now:
                    break
                _, _, j = heapq.heappop(self._heap)
                slot_now = self.now
                self._complete(j, t)
                self.now = slot_now
                done += 1
            if self._hold_ends:
                self._end_holds()
            if self.rerank:
                self._touch(range(len(self._uplink_ver)))    # every uplink ranks afresh
                for k in list(self.running):
                    self._retime(self.running[k])
            while next_arrival < n_jobs and jobs[next_arrival].arrival <= self.now:
                self.waiting[next_arrival] = None
                self.policy.on_arrival(self, next_arrival)
                next_arrival += 1
            had_waiting, before = bool(self.waiting), len(self.waiting)
            moved = self.plan                 # migrations at the completions above
            plan = decide_slot(self, self.policy, self.mechanisms)
            for p in (moved, plan) if self.on_plan else ():
                if p.steps:
                    self.on_plan(self.now, p)
            self.plan = SlotPlan()            # what happens between slots (migrations)
            if had_waiting:
                if self.running or len(self.waiting) != before or next_arrival < n_jobs:
                    stalled = 0
                else:
                    stalled += 1
                    if stalled > self.max_stalled_slots:
                        stuck = [self.jobs[j].name for j in list(self.waiting)[:3]]
                        raise RuntimeError(f"policy {self.policy.name} has left jobs {stuck} "
                                           f"waiting on an idle cluster for {stalled} slots")
            if self.progress and done - last_progress >= max(n_jobs // 200, 1):
                self.progress(done, n_jobs)
                last_progress = done
            if done >= n_jobs:
                break
            # next decision time
            t_next = math.inf
            if next_arrival < n_jobs:
                t_next = self._slot_at_or_after(jobs[next_arrival].arrival)
            t_next = min(t_next, self._slot_at_or_after(self._next_completion()))
            if self._hold_ends:
                t_next = min(t_next, self._slot_at_or_after(self._hold_ends[0][0]))
            if self.rerank and self.running:
                t_next = min(t_next, self.now + self.slot)
            if self.waiting:
                if self.policy.wants_slot(self):
                    t_next = min(t_next, self.now + self.slot)
                # e.g. LAS: a threshold crossing; time-slicing: a quantum's end
                t_next = min(t_next, self._slot_at_or_after(self.policy.next_wakeup(self)),
                             *(self._slot_at_or_after(m.next_event(self)) for m in self.mechanisms))
            if math.isinf(t_next):
                stuck = [self.jobs[j].name for j in list(self.waiting)[:3]]
                raise RuntimeError(f"policy {self.policy.name} cannot start jobs {stuck} "
                                   "and nothing is running")
            t_next = max(t_next, self.now + self.slot)
            skipped = int(round((t_next - self.now) / self.slot)) - 1
            if skipped > 0 and not self.running and not self.waiting:
                self.policy.idle(self, skipped)     # as decide_slot ages it on a visited slot
            self.now = t_next
        if self.progress:
            self.progress(n_jobs, n_jobs)
        return self._result()

    def _result(self) -> SimResult:
        arrival = np.array([j.arrival for j in self.jobs])
        finish = np.array(self.finish)
        jct = finish - arrival
        wait = np.array(self.first_start) - arrival
        makespan = float(finish.max() - arrival.min())
        util = self.gpu_seconds / (self.state.total_gpus * makespan) if makespan > 0 else 0.0
        uplink_time, end = list(self.uplink_time), float(finish.max())
        for since in self._uplink_since:         # every uplink idle since its last change
            uplink_time[0] += max(end - since, 0.0)
        return SimResult(
            policy=self.policy.name, jobs=len(self.jobs), avg_jct=float(jct.mean()),
            median_jct=float(np.median(jct)), p95_jct=float(np.percentile(jct, 95)),
            avg_wait=float(wait.mean()), makespan=makespan, gpu_util=float(util),
            jct=jct.tolist(), gpus=list(self.ran_gpus),
            trace=list(self.policy.trace), decisions=self.decisions,
            record_args=(self.topology, list(self.jobs), list(self.placements),
                         list(self.ran_gpus), list(self.first_start), list(self.finish)),
            exchange_share=self.exchange_s / self.run_s if self.run_s > 0 else 0.0,
            uplink_time=uplink_time)


def simulate(topology: Topology, jobs: Sequence[JobSpec], policy, **kw) -> SimResult:
    return Simulator(topology, jobs, policy, **kw).run()


def stderr_progress(label: str) -> Callable[[int, int], None]:
    """A progress bar on stderr (jobs done of all, elapsed, ETA); quiet off a terminal."""
    from sluice_common.progress import count_bar
    return count_bar(label, "jobs")
