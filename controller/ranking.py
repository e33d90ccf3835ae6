"""Progress-based ranking of parameter-server flows (pure): the ``progress`` rule (see
:mod:`sluice_common.job_rank` for the job-level rules).

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

from typing import Iterable, NamedTuple

PULL, PUSH = "pull", "push"
_KIND_ORDER = {PULL: 0, PUSH: 1}


class FlowKey(NamedTuple):
    """One directed PS flow, identified by its endpoints (what the switch matches on).
    A NamedTuple, not a dataclass: it is hashed ~10^5 times per reconcile and tuple
    hashing runs in C."""
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
    0 = most urgent. Pure and deterministic: the same state always gives the same map.
    Linear in the number of flows (grouped by urgency; only the distinct urgencies are
    sorted), because it runs on every progress report."""
    if levels < 1:
        raise ValueError("levels must be >= 1")
    groups: dict[tuple[int, int], list[FlowKey]] = {}
    for f, b in flows:
        groups.setdefault((b, _KIND_ORDER[f.kind]), []).append(f)
    keys = sorted(groups)
    n = len(keys)
    out: dict[FlowKey, int] = {}
    for i, key in enumerate(keys):
        # More distinct urgencies than levels: bucket proportionally so that the order is
        # kept (monotone) and every level is used.
        level = i if n <= levels else (i * levels) // n
        for f in groups[key]:
            out[f] = level
    return out


def ordered(flows: Iterable[tuple[FlowKey, int]]) -> list[tuple[FlowKey, int]]:
    """The flows in rank order (for listings)."""
    return sorted(flows, key=lambda fb: sort_key(*fb))
