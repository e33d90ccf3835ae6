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
- ``progress``: strict priority by batches done (least first); equal ones share fairly;
- ``attained``: strict priority by MLFQ level of attained bytes; one level shares fairly.

Work-conserving by construction: whatever a higher job cannot use goes down the list. The
model ignores TCP dynamics and start-up; ``startup_s`` adds a fixed delay per job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from controller.job_rank import ATTAINED_BASE_BYTES, ATTAINED_FACTOR, attained_level

MODES = ("off", "progress", "remaining", "attained")


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


def simulate(jobs: list[FluidJob], mode: str, capacity: float, dt: float = 0.01,
             startup_s: float = 0.0, attained_base: float = ATTAINED_BASE_BYTES,
             attained_factor: float = ATTAINED_FACTOR, levels: int = 8) -> dict[str, float]:
    """Job name -> completion time minus arrival (JCT), under ``mode``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
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
            if mode == "remaining":
                key = {j.name: (j.size - done_bytes[j.name], j.arrival) for j in active}
            elif mode == "progress":
                # batches done (whole batches: the rule sees batch numbers)
                key = {j.name: (math.floor(done_bytes[j.name] / (2 * j.bytes_per_batch)),)
                       for j in active}
            else:
                key = {j.name: (attained_level(done_bytes[j.name] / 2, levels, attained_base,
                                               attained_factor),) for j in active}
            groups: dict[tuple, list[str]] = {}
            for name in sorted(key, key=lambda n: key[n]):
                # remaining: one job per level (7 levels, then the rest share the last)
                k = key[name] if mode != "remaining" else (len(groups) if len(groups) < levels - 1
                                                           else levels - 1,)
                groups.setdefault(k, []).append(name)
            rates = _by_groups([groups[k] for k in sorted(groups)], caps, total)
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


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")
