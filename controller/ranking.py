"""Progress-based ranking of parameter-server flows (pure).

Every registered job has push flows (worker -> server) and pull flows (server -> worker).
A flow's urgency key is ``(batch, kind)`` where ``batch`` is the last batch its worker
reported (0 until the first report: a job that just started is the most urgent) and
``kind`` orders pull before push within one batch: a worker waiting on a pull cannot
start its next batch, while a push can overlap the next pull.

Flows with the same urgency key share a level (it would be unfair to split two equally
late workers); distinct keys are ranked densely and spread over the available levels.
When there are more distinct keys than levels, the least urgent keys share the bottom
level(s) proportionally. The full order (used for listings) adds a deterministic
tie-break on job id, worker, server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

PULL, PUSH = "pull", "push"
_KIND_ORDER = {PULL: 0, PUSH: 1}


@dataclass(frozen=True, order=True)
class FlowKey:
    """One directed PS flow, identified by its endpoints (what the switch matches on)."""
    job: str
    kind: str          # PULL or PUSH
    worker: str        # worker id inside the job
    server: str        # server id inside the job
    src_ip: str
    dst_ip: str
    dst_port: int


def urgency(batch: int, kind: str) -> tuple[int, int]:
    return (batch, _KIND_ORDER[kind])


def sort_key(flow: FlowKey, batch: int) -> tuple:
    """Smaller batch first, pull before push, then job/worker/server for determinism."""
    return (*urgency(batch, flow.kind), flow.job, flow.worker, flow.server, flow.src_ip,
            flow.dst_ip, flow.dst_port)


def assign_levels(flows: Iterable[tuple[FlowKey, int]], levels: int) -> dict[FlowKey, int]:
    """``flows`` is (flow, batch of its worker). Returns flow -> level in 0..levels-1,
    0 = most urgent. Pure and deterministic: the same state always gives the same map."""
    if levels < 1:
        raise ValueError("levels must be >= 1")
    items = sorted(flows, key=lambda fb: sort_key(*fb))
    keys = sorted({urgency(b, f.kind) for f, b in items})
    n = len(keys)
    if n <= levels:
        level_of_key = {k: i for i, k in enumerate(keys)}
    else:
        # More distinct urgencies than levels: bucket proportionally so that the order
        # is kept (monotone) and every level is used.
        level_of_key = {k: (i * levels) // n for i, k in enumerate(keys)}
    return {f: level_of_key[urgency(b, f.kind)] for f, b in items}


def ordered(flows: Iterable[tuple[FlowKey, int]]) -> list[tuple[FlowKey, int]]:
    """The flows in rank order (for listings)."""
    return sorted(flows, key=lambda fb: sort_key(*fb))
