"""The state the controller's managers share, and the order of its locks.

Each manager (controller/fabric_events.py, reports.py, job_ops.py, views.py,
reconcile.py, persistence.py) keeps its own caches and reads the rest from one
:class:`Shared`. Locks, always taken in this order (a thread holding one never waits for
an earlier one, so no two threads can wait on each other):

1. ``Reports.reconcile_lock``: one group commit of progress reports at a time;
2. ``lock`` (re-entrant): the fabric, the set of jobs, the rules installed and every
   manager's cache; fabric events and northbound calls hold it throughout;
3. ``StateStore.snapshot_lock``: one state-file writer at a time;
4. ``report_lock``: what a progress report touches (batches, credentials, the journal,
   the pending reports), so that reports are recorded while a reconcile holds ``lock``.

The rate limiter's own lock (controller/ratelimit.py) is taken under ``report_lock`` and
takes none.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from controller.config import ControllerConfig
from controller.flowtable import FlowTable
from controller.forwarding import FabricView
from controller.linkstats import LinkStats
from controller.metrics import Metrics
from controller.registry import Registry
from controller.sinks import FlowSink


@dataclass(eq=False)
class Shared:
    config: ControllerConfig
    clock: Callable[[], float]
    sink: FlowSink
    fabric: FabricView
    registry: Registry
    # job id -> the credential the northbound guard keeps with the job (the sha256 of
    # its token): opaque here, stored and persisted with the job
    credentials: dict[str, str]
    rank: str                  # the ranking rule in force (POST /rank changes it)
    installed: FlowTable = field(default_factory=FlowTable)   # what switches were told
    metrics: Metrics = field(default_factory=Metrics)
    linkstats: LinkStats = field(default_factory=LinkStats)
    # stamps registrations (the ``aged`` rule's registration times, saved with the jobs)
    wall_clock: Callable[[], float] = time.time
    lock: threading.RLock = field(default_factory=threading.RLock)
    report_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.known_ips = {h.ip for h in self.config.topology.hosts}

    def switch_name(self, dpid: int) -> str:
        return self.fabric.name_of_dpid.get(dpid, f"{dpid:016x}")
