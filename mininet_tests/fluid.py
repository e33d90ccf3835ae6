"""A fluid model of PS jobs sharing one bottleneck under each ranking rule (pure).

Each job moves ``S = 2 * batches * bytes_per_batch`` bytes (every batch pushes and pulls
its parameters) across a link of ``capacity`` bytes/s per direction. Push and pull use
opposite directions, so the jobs together can move up to ``2 * capacity``; one job moves
at most ``rate_cap * capacity`` on its own (its iteration is ``compute + push + pull``
and the link is busy for it only during the exchange: ``rate_cap = 2 * bytes_per_batch /
(iteration alone * capacity)``, at most 2 when push and pull overlap completely). Time advances in small steps;
in each step the rule shares the capacity among active jobs, up to each job's cap:

- ``off``: max-min fair (TCP flows sharing one FIFO class);
- ``remaining``: strict priority by remaining bytes (smallest first);
- ``aged``: as ``remaining``, each job's remaining bytes raised by the rule's rate times
  its arrival (:func:`sluice_common.job_rank.aged_bytes`: a job registers as it arrives);
- ``progress``: strict priority by batches done (least first); equal ones share fairly;
- ``attained``: strict priority by MLFQ level of attained bytes; one level shares fairly.

Work-conserving by construction: whatever a higher job cannot use goes down the list. The
model ignores TCP dynamics and start-up; ``startup_s`` adds a fixed delay per job.

:func:`simulate_batches` is the same loop with the exchange model
(:mod:`sluice_common.exchange`) in place of the shares: per batch, the ps-lite rounds, the
queue at the shaped egress and each class's share (the heavy-tail experiment's
``predicted_mean_jct_s``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sluice_common.exchange import (ExchangeConstants, Sharer, default_constants, egress_state,
                                    share_egress, startup_time)
from sluice_common import rank_rules
from sluice_common.job_rank import (ATTAINED_BASE_BYTES, ATTAINED_FACTOR, JobLoad,
                                    attained_levels_at)


def modes() -> tuple[str, ...]:
    """``off`` (fair sharing) and every registered ranking rule."""
    return ("off", *rank_rules.names())


@dataclass(frozen=True)
class FluidJob:
    name: str
    arrival: float
    batches: int
    bytes_per_batch: float
    rate_cap: float               # bytes/s it moves alone, over one direction's capacity

    @property
    def size(self) -> float:
        return 2.0 * self.batches * self.bytes_per_batch


def _fair(caps: dict[str, float], capacity: float) -> dict[str, float]:
    """Max-min fair shares (water-filling) of ``capacity`` with per-job caps."""
    out = {}
    left, pending = capacity, sorted(caps, key=lambda j: caps[j])
    while pending:
        even = left / len(pending)
        j = pending[0]
        if caps[j] <= even:
            out[j] = caps[j]
            left -= caps[j]
            pending.pop(0)
        else:
            for j in pending:
                out[j] = even
            break
    return out


def _by_groups(groups: list[list[str]], caps: dict[str, float], capacity: float) -> dict[str, float]:
    """Strict priority between groups (most urgent first), max-min fair inside one."""
    out = {}
    left = capacity
    for group in groups:
        share = _fair({j: caps[j] for j in group}, left)
        out.update(share)
        left = max(0.0, left - sum(share.values()))
    return out



def rank_groups(active: list, mode: str, done_bytes: dict[str, float],
                attained_base: float = ATTAINED_BASE_BYTES,
                attained_factor: float = ATTAINED_FACTOR, levels: int = 8,
                attained_thresholds: tuple[float, ...] | None = None) -> list[list[str]]:
    """The active jobs (each with ``name``, ``arrival``, ``batches``, ``bytes_per_batch``)
    in the rule's priority groups, most urgent first (``done_bytes``: bytes moved so far,
    push and pull): the controller's levels (:func:`sluice_common.rank_rules.job_levels`),
    on fractional progress, each job registered at its arrival; ties go to the earlier
    arrival. ``attained_thresholds``: the
    demotion points (bytes per direction) of a rule that levels each job by its own load
    (``attained``) instead of base * factor**k (PIAS's, per connection: a job's push and
    its pull move the same bytes)."""
    rule = rank_rules.rule(mode)
    order = sorted(active, key=lambda j: (j.arrival, j.name))
    loads = [JobLoad(j.name, k,
                     # progress sees whole batch numbers; the job rules see bytes
                     math.floor(done_bytes[j.name] / (2 * j.bytes_per_batch)) if rule.by_batch
                     else done_bytes[j.name] / (2 * j.bytes_per_batch),
                     j.batches, j.bytes_per_batch, registered_s=j.arrival)
             for k, j in enumerate(order)]
    if attained_thresholds is not None and rule.shape == rank_rules.OWN:
        level = attained_levels_at(loads, attained_thresholds)
    else:
        level = rule.job_levels(loads, levels, attained_base, attained_factor)
    groups: dict[int, list[str]] = {}
    for j in order:
        groups.setdefault(level[j.name], []).append(j.name)
    return [groups[k] for k in sorted(groups)]


def simulate(jobs: list[FluidJob], mode: str, capacity: float, dt: float = 0.01,
             startup_s: float = 0.0, attained_base: float = ATTAINED_BASE_BYTES,
             attained_factor: float = ATTAINED_FACTOR, levels: int = 8,
             attained_thresholds: tuple[float, ...] | None = None) -> dict[str, float]:
    """Job name -> completion time minus arrival (JCT), under ``mode``
    (``attained_thresholds``: see :func:`rank_groups`)."""
    if mode not in modes():
        raise ValueError(f"mode must be one of {modes()}, got {mode!r}")
    done_bytes = {j.name: 0.0 for j in jobs}
    by_name = {j.name: j for j in jobs}
    jct: dict[str, float] = {}
    t = 0.0
    total = 2.0 * capacity
    while len(jct) < len(jobs):
        active = [j for j in jobs if j.arrival + startup_s <= t and j.name not in jct]
        if not active:
            t = min(j.arrival + startup_s for j in jobs if j.name not in jct)
            continue
        caps = {j.name: j.rate_cap * capacity for j in active}
        if mode == "off":
            rates = _fair(caps, total)
        else:
            groups = rank_groups(active, mode, done_bytes, attained_base, attained_factor, levels,
                                 attained_thresholds)
            rates = _by_groups(groups, caps, total)
        step = dt
        for name, rate in rates.items():
            left = by_name[name].size - done_bytes[name]
            if rate > 0 and left / rate < step:
                step = max(left / rate, 1e-6)
        for name, rate in rates.items():
            done_bytes[name] += rate * step
        t += step
        for name in rates:
            if done_bytes[name] >= by_name[name].size * (1 - 1e-9):
                jct[name] = t - by_name[name].arrival
    return jct


@dataclass(frozen=True)
class BatchJob:
    """A job for :func:`simulate_batches`: its batches, their exchange and its path."""
    name: str
    arrival: float
    batches: int
    bytes_per_batch: float
    compute_s: float
    keys: int
    window: int
    path: tuple[float, ...]

    @property
    def size(self) -> float:
        return 2.0 * self.batches * self.bytes_per_batch


def _sharers(active: list[BatchJob], cls, in_init) -> list[Sharer]:
    """The active jobs as the egress sees them: one in ``kv.init`` pushes every key at
    once and then pulls them (window 0), no compute."""
    return [Sharer(j.name, j.bytes_per_batch, j.keys, j.path, 0.0, 0, cls[j.name])
            if in_init(j.name) else
            Sharer(j.name, j.bytes_per_batch, j.keys, j.path, j.compute_s, j.window,
                   cls[j.name]) for j in active]


def _note_starts(started: dict[str, float], it: dict[str, float], t: float,
                 done: dict[str, float], init: int, ready: dict[str, float],
                 by_name: dict[str, BatchJob], overhead_s: float) -> None:
    """The jobs whose first batch after ``kv.init``'s has begun by ``t``: their start-up
    as the experiments measure it (arrival to that batch, ``overhead_s`` included)."""
    for n in it:
        if n not in started and done[n] >= init:
            at = t - (done[n] - init) * it[n] if init else ready[n]
            started[n] = at - by_name[n].arrival + overhead_s


def _startup(job: BatchJob, running: list[BatchJob], classes, in_init, capacity: float,
             buffer_bytes: float, c: ExchangeConstants, urgent_bytes: float | None,
             prioritised: bool) -> float:
    """The model's start-up of ``job`` arriving among ``running``: the queue wait it meets
    in its class, then kv.init's exchange (:func:`~sluice_common.exchange.startup_time`)."""
    cls = classes(running + [job])
    wait = egress_state(_sharers(running + [job], cls, in_init), capacity, buffer_bytes, c,
                        urgent_bytes=urgent_bytes)[1]
    return startup_time(wait[job.name], c, prioritised)


def seen_bytes(done: float, init: int, bytes_per_batch: float, host_tagged: bool) -> float:
    """Bytes a job has moved (push and pull) as its rule sees them, ``done`` batches
    modelled of which the first ``init`` are ``kv.init``'s exchange: the controller's
    reports count batches, not ``kv.init``'s; a host-tagging rule (PIAS's thresholds)
    counts every byte its flows sent."""
    return 2 * max(0.0, done - (0 if host_tagged else init)) * bytes_per_batch


def simulate_batches(jobs: list[BatchJob], mode: str, capacity: float, buffer_bytes: float,
                     constants: ExchangeConstants | None = None, dt: float = 0.05,
                     startup_s: float | None = None, attained_base: float = ATTAINED_BASE_BYTES,
                     attained_factor: float = ATTAINED_FACTOR, levels: int = 8,
                     overhead_s: float = 0.0, started: dict[str, float] | None = None,
                     urgent_bytes: float | None = None,
                     attained_thresholds: tuple[float, ...] | None = None) -> dict[str, float]:
    """Job name -> JCT with the exchange model (:mod:`sluice_common.exchange`) in place of
    the fluid shares: in each step the active jobs share the egress per batch
    (``share_egress``: rounds, queueing, compute gaps), ``off`` in one class, a rule with
    its groups as strict priority classes; each job advances ``step / iteration``
    batches. The class order is recomputed every step (the rules re-rank as jobs move).

    A job starts moving batches after its start-up: ``startup_s`` if given, else the
    model's :func:`~sluice_common.exchange.startup_time` for the queue wait it meets on
    arrival (its class among the jobs then active) followed by one batch more, the
    exchange of ``kv.init``'s push and first pull, which shares the egress as a batch
    does, with every key at once (window 0) and no compute. ``overhead_s`` is added to
    every JCT (what the driver around the jobs adds: a scheduling slot, noticing the end).
    ``started``, when given, receives each job's start-up as the experiments measure it:
    arrival to its first batch (after ``kv.init``'s), ``overhead_s`` included.
    ``urgent_bytes``: the leaves are fair-queued (:func:`~sluice_common.exchange.share_egress`).
    ``attained_thresholds``: see :func:`rank_groups`."""
    if mode not in modes():
        raise ValueError(f"mode must be one of {modes()}, got {mode!r}")
    c = constants or default_constants()
    by_name = {j.name: j for j in jobs}
    done = {j.name: 0.0 for j in jobs}               # batches done (fractional)
    ready: dict[str, float] = {}                     # name -> when its first batch starts
    jct: dict[str, float] = {}
    cache: dict[tuple, dict[str, float]] = {}
    need = {j.name: j.batches + (0 if startup_s is not None else 1) for j in jobs}

    init = 0 if startup_s is not None else 1          # batches of kv.init still to model

    def classes(active: list[BatchJob]) -> dict[str, int | None]:
        if mode == "off":
            return {j.name: None for j in active}
        moved = {j.name: seen_bytes(done[j.name], init, j.bytes_per_batch,
                                    attained_thresholds is not None) for j in active}
        groups = rank_groups(active, mode, moved, attained_base, attained_factor, levels,
                             attained_thresholds)
        return {n: k for k, g in enumerate(groups) for n in g}

    def in_init(name: str) -> bool:
        return done[name] < init * (1 - 1e-9)

    t = min(j.arrival for j in jobs) if jobs else 0.0
    while len(jct) < len(jobs):
        running = [j for j in jobs if j.name in ready and ready[j.name] <= t and j.name not in jct]
        for j in jobs:                       # arrivals: their start-up, as the egress is now
            if j.name not in ready and j.arrival <= t:
                ready[j.name] = j.arrival + (startup_s if startup_s is not None else _startup(
                    j, running, classes, in_init, capacity, buffer_bytes, c, urgent_bytes,
                    mode != "off"))
        active = [j for j in jobs if j.name in ready and ready[j.name] <= t and j.name not in jct]
        later = [ready.get(j.name, j.arrival) for j in jobs
                 if j.name not in jct and ready.get(j.name, j.arrival) > t]
        if not active:
            t = min(later)
            continue
        cls = classes(active)
        key = tuple(sorted((n, cls[n] if cls[n] is not None else -1, in_init(n)) for n in cls))
        if key not in cache:
            cache[key] = share_egress(_sharers(active, cls, in_init), capacity,
                                      buffer_bytes, c, urgent_bytes=urgent_bytes)
        it = cache[key]
        step = min([dt] + [max((need[n] - done[n]) * it[n], 1e-6) for n in it]
                   + [max((init - done[n]) * it[n], 1e-6) for n in it if in_init(n)]
                   + [x - t for x in later])
        for n in it:
            done[n] += step / it[n]
        t += step
        if started is not None:
            _note_starts(started, it, t, done, init, ready, by_name, overhead_s)
        for n in it:
            if done[n] >= need[n] * (1 - 1e-9):
                jct[n] = t - by_name[n].arrival + overhead_s
    return jct


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")
