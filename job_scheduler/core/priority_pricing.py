"""What a placement's bandwidth is worth when the fabric runs strict priority: the
simulator's strict-priority uplink model, written once, for the simulator
that times running jobs and for a policy that prices a placement it has not started.

On a rack uplink of capacity ``cap`` the jobs crossing it are put in the levels the
fabric's rule gives them (:mod:`sluice_common.rank_rules`, the controller's own
functions), and level by level each gets, per flow, an equal share of what the levels
before it left: ``left_k = cap - sum_{i in levels < k} f_i * d_i``, where ``d_i =
min(share, base_i / nps_i) * Comm_i / C_i`` is what a flow of job ``i`` really uses (its
rate while it communicates, times the share of its iteration spent communicating)
(:func:`class_capacity`). A job's bandwidth is ``nps * left_k / flows_k`` on each uplink
it crosses, capped by its bandwidth alone.

Pricing a candidate (:func:`priced_bandwidth`): the candidate joins the running jobs on
each uplink its placement crosses, the rule ranks it among them on its work done (a job
not started yet has moved nothing), and it is priced at its level's share. A job the
rule puts on top gets (close to) the whole uplink however many flows cross it; a job at
the bottom gets what the more urgent jobs leave. With the rule off (``None``) every job
is in one level, and the price is the fair share, ``nps * cap / (flows on the uplink +
its own)``: the simulator's ``live_bandwidth`` to the last bit
(tests/unit/job_scheduler/core/test_priority_pricing.py). The queueing the exchange model
adds (:func:`sluice_common.exchange_waits.queue_wait_s`) is left out here as it is for the fair
share: a policy's look at a placement prices its bandwidth.

Pure: a loop (the simulator, a ``LiveView``) hands in what it knows of its running jobs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from sluice_common import job_rank, rank_rules
from topologies.priority_classes import LEVELS


@dataclass(frozen=True)
class LinkSharer:
    """A running job on one uplink: its ``level``, its ``flows`` there, its parameter
    servers, its bandwidth alone (Mbit/s), its communication seconds at a bandwidth
    (``comm_s``) and its compute seconds (``cost_s``), both for its whole run."""
    level: int
    flows: int
    servers: int
    base_bw: float
    comm_s: Callable[[float], float]
    cost_s: float

    def used(self, share: float) -> float:
        """Mbit/s its flows use on the uplink when each is offered ``share``: the rate
        while it communicates times the share of its iteration spent communicating."""
        rate = min(share, self.base_bw / self.servers)
        busy = self.comm_s(rate * self.servers)
        duty = busy / (self.cost_s + busy) if busy else 0.0
        return self.flows * rate * duty


def class_capacity(capacity: float, others: Sequence[LinkSharer], level: int,
                   flows: int) -> tuple[float, int]:
    """Strict priority on one uplink: (the Mbit/s the levels before ``level`` leave,
    the flows sharing it: ``others``' at that level and the job's own ``flows``).
    ``others`` in a fixed order (the simulator's: by job key)."""
    left = capacity
    for k in sorted({s.level for s in others} | {level}):
        here = [s for s in others if s.level == k]
        count = sum(s.flows for s in here) + (flows if k == level else 0)
        if k == level:
            return left, count
        share = left / count if count else left
        for s in here:
            left -= s.used(share)
        left = max(left, 1e-9 * capacity)
    raise AssertionError("unreachable: the job's own level is in the loop")


def rule_levels(rule: str, jobs: Iterable[tuple[int, object, float]], estimator
                ) -> dict[int, int]:
    """Each job's level under ``rule`` (a name of :mod:`sluice_common.rank_rules`), from
    ``(key, spec, fraction of its work left)``: its batches are ``epochs * dataset_size /
    batch_size``, a batch moves the model's parameter bytes (a job's own bytes where it
    states them, ``Estimator.rule_bytes``), registered at its arrival."""
    loads = [sized_load(key, *rule_size(spec, estimator), remaining, spec.arrival)
             for key, spec, remaining in jobs]
    got = rank_rules.job_levels(rule, loads, LEVELS)
    return {int(k): v for k, v in got.items()}


def rule_size(spec, estimator) -> tuple[int, int]:
    """What :func:`rule_levels` reads of a job's spec: (its batches in all, the bytes a
    batch moves); fixed for a job, so a loop that ranks it often may keep them."""
    total = max(1, round(spec.epochs * spec.dataset_size / spec.batch_size))
    return total, estimator.rule_bytes(spec)


def sized_load(key: int, total: int, size: int, remaining: float,
               registered_s: float = 0.0) -> job_rank.JobLoad:
    """What the rule reads of job ``key`` with :func:`rule_size`'s figures, the fraction of
    its work left (the same all of one instant) and when it registered (its arrival)."""
    return job_rank.JobLoad(str(key), key, round((1.0 - remaining) * total), total, size,
                            registered_s=registered_s)


def rank_item(rule: rank_rules.RankRule, load: job_rank.JobLoad):
    """What :func:`rank_levels` reads of one job's load under ``rule``: an ORDER rule's
    sort key and the job's own key (``sized_load``'s ``order``: unique, so it sorts as
    :meth:`RankRule.job_levels` sorts the key and job name), any other rule's load."""
    return (rule.key(load), load.order) if rule.shape == rank_rules.ORDER else load


def rank_levels(rule: rank_rules.RankRule, items: Sequence,
                thresholds: tuple[float, ...] | None = None) -> dict[int, int]:
    """:func:`rule_levels` of the jobs' :func:`rank_item` (an ORDER rule's keys read once
    per load, however many uplinks rank it): :meth:`RankRule.job_levels`'s answer; with
    ``thresholds`` (``attained``, whose items are the loads) PIAS's levels: explicit
    demotion thresholds in bytes a connection has sent, as its hosts tag
    (``job_rank.attained_levels_at``), in place of the rule's geometric ones."""
    if thresholds is not None:
        got = job_rank.attained_levels_at(items, thresholds)
    elif rule.shape == rank_rules.ORDER:
        return job_rank.top_k_levels(list(items), LEVELS)      # keyed by the job keys
    else:
        got = rule.job_levels(items, LEVELS)
    return {int(k): v for k, v in got.items()}


def uplink_capacities(topology) -> list[float]:
    """Each rack's uplink capacity (Mbit/s): the sum of its ToR's switch links (inf for
    a rack with none)."""
    cap = [sum((l.bw for l in topology.links if r.tor in (l.a, l.b)), 0.0)
           for r in topology.racks]
    return [c if c > 0 else math.inf for c in cap]


def placement_flows(state, placement) -> dict[int, int]:
    """Rack uplink -> number of the placement's worker<->PS flows crossing it."""
    ps = [state.rack_of[state.index[h]] for h in placement.ps_hosts]
    out: dict[int, int] = {}
    for w in placement.worker_hosts:
        rw = state.rack_of[state.index[w]]
        for rp in ps:
            if rp != rw:
                out[rw] = out.get(rw, 0) + 1
                out[rp] = out.get(rp, 0) + 1
    return out


@dataclass(frozen=True)
class Candidate:
    """The job being priced: its key, spec, fraction of work left, placement, its
    bandwidth alone (``base_bw``) and its flows per uplink."""
    key: int
    spec: object
    remaining: float
    servers: int
    base_bw: float
    flows: Mapping[int, int]


def priced_bandwidth(cand: Candidate, rule: str | None, capacity: Sequence[float],
                     users: Callable[[int], Sequence[int]],
                     sharer: Callable[[int, int, int], LinkSharer],
                     load: Callable[[int], tuple[int, object, float]], estimator) -> float:
    """The candidate's bandwidth (Mbit/s) on its placement under ``rule`` (None: the
    fair share), with the running jobs ``users(r)`` on each uplink ``r`` it crosses
    (module doc). ``sharer(k, r, level)``: running job ``k`` on uplink ``r``;
    ``load(k)``: ``(k, spec, work left)`` for the rule."""
    bw = cand.base_bw
    if math.isinf(bw):
        return bw
    mine = (cand.key, cand.spec, cand.remaining)
    for r, f in cand.flows.items():
        on = sorted(k for k in users(r) if k != cand.key)
        if rule is None:
            level = dict.fromkeys(on + [cand.key], 0)
        else:
            level = rule_levels(rule, [load(k) for k in on] + [mine], estimator)
        others = [sharer(k, r, level[k]) for k in on]
        left, count = class_capacity(capacity[r], others, level[cand.key], f)
        bw = min(bw, cand.servers * left / count)
    return bw
