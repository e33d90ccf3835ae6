"""The controller's brain behind one facade: what the os-ken app and the northbound API
call.

:class:`ControllerService` owns no sockets and makes no decisions of its own: it builds
the managers, one concern each, around one :class:`~controller.state.Shared` state, and
hands each call to the manager whose concern it is:

  fabric_events.py  switches, links, hosts, ARP, port counters (the os-ken app's events)
  job_ops.py        register/remove a job, the ranking rule (northbound changes)
  reports.py        progress reports: check, record, journal, group commit (hot path)
  views.py          jobs, flows, rules, links, metrics (northbound reads)
  reconcile.py      desired rules -> diff -> flow mods, in full or for what moved
  settling.py       rules kept on a reconnected switch until the fabric is known again
  persistence.py    the state file and the progress journal

The locks and their order are in controller/state.py. Flow mods leave through a *sink*
(controller/sinks.py). Each public method validates first and changes state only when
everything is valid (a rejected request raises a :mod:`controller.errors` exception).
Tokens and rate limits are the northbound guard's (:mod:`controller.auth`); status
codes are the REST API's.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

from sluice_common import rank_rules
from controller import rules as R
from controller.config import ControllerConfig
from controller.errors import Refused
from controller.fabric_events import FabricEvents
from controller.flowtable import FlowTable
from controller.forwarding import FabricView
from controller.job_ops import JobOps
from controller.linkstats import LinkStats
from controller.metrics import Metrics
from controller.packets import ArpIn
from controller.persistence import StateStore, load_state
from controller.reconcile import Reconciler
from controller.registry import Registry
from controller.reports import Answer, Reports
from controller.settling import SETTLE_S, Settling
from controller.sinks import FlowSink, TableSink
from controller.state import Shared
from controller.views import Views

__all__ = ["ControllerConfig", "ControllerService", "FlowSink", "TableSink", "SETTLE_S"]


class ControllerService:
    def __init__(self, config: ControllerConfig, sink: FlowSink | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        scope, t = config.scope, config.topology
        fabric = FabricView(t, owned=None if scope is None else frozenset(
            s.dpid for s in t.switches if s.name in scope.owned))
        registry, credentials, saved_rank = Registry(), {}, None
        if config.state_file and Path(config.state_file).exists():
            registry, credentials, saved_rank = load_state(
                Path(config.state_file), {h.ip for h in config.topology.hosts}, fabric)
        self.config = config
        self.shared = s = Shared(config, clock, sink or TableSink(), fabric, registry,
                                 credentials, config.rank or saved_rank or rank_rules.DEFAULT_RULE)
        self.persistence = StateStore(s)
        settling = Settling(s)
        self.reconciler = Reconciler(s, settling)
        self.fabric_events = FabricEvents(s, self.reconciler, settling, self.persistence)
        self.job_ops = JobOps(s, self.reconciler, self.persistence)
        self.reports = Reports(s, self.reconciler, self.persistence)
        self.views = Views(s, self.reconciler)

    # ---- the shared state, as callers (the os-ken app, tests) read it ---------------
    fabric: FabricView = property(lambda self: self.shared.fabric)
    registry: Registry = property(lambda self: self.shared.registry)
    installed: FlowTable = property(lambda self: self.shared.installed)
    metrics: Metrics = property(lambda self: self.shared.metrics)
    linkstats: LinkStats = property(lambda self: self.shared.linkstats)
    known_ips: set[str] = property(lambda self: self.shared.known_ips)
    lock = property(lambda self: self.shared.lock)

    @property
    def sink(self) -> FlowSink:
        return self.shared.sink

    @sink.setter
    def sink(self, sink: FlowSink) -> None:      # the os-ken app plugs itself in
        self.shared.sink = sink

    @property
    def clock(self) -> Callable[[], float]:
        return self.shared.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:     # tests move time
        self.shared.clock = clock

    # ---- fabric events (controller/fabric_events.py) --------------------------------
    def switch_up(self, dpid: int, ports: dict[int, str],
                  table: list[R.Rule] | None = None) -> None:
        self.fabric_events.switch_up(dpid, ports, table)

    def switches_up(self, switches: list[tuple[int, dict[int, str], list[R.Rule] | None]],
                    alive: Callable[[int], bool] = lambda dpid: True) -> None:
        """Switches that connected together: one reconcile for all (see FabricEvents)."""
        self.fabric_events.switches_up(switches, alive)

    def switches_changed(self, changes: list[tuple[str, int, dict[int, str] | None,
                                                   list[R.Rule] | None]],
                         alive: Callable[[int], bool] = lambda dpid: True) -> None:
        """Switches up and down, in order, then one reconcile (see FabricEvents)."""
        self.fabric_events.switches_changed(changes, alive)

    def tick(self) -> None:
        self.fabric_events.tick()

    def update_ports(self, dpid: int, ports: dict[int, str]) -> None:
        self.fabric_events.update_ports(dpid, ports)

    def switch_down(self, dpid: int) -> None:
        self.fabric_events.switch_down(dpid)

    def link_seen(self, src: tuple[int, int], dst: tuple[int, int]) -> None:
        self.fabric_events.link_seen(src, dst)

    def host_seen(self, ip: str, dpid: int, port: int, mac: str) -> bool:
        return self.fabric_events.host_seen(ip, dpid, port, mac)

    def host_mac(self, ip: str) -> str | None:
        return self.fabric_events.host_mac(ip)

    def on_arp(self, dpid: int, in_port: int, a: ArpIn) -> None:
        """Proxy ARP; probes and answers leave through the sink's ``packet_out``."""
        self.fabric_events.on_arp(dpid, in_port, a)

    def probes_for(self, ip: str) -> list[tuple[int, int, bytes]]:
        return self.fabric_events.probes_for(ip)

    def unlocated_hosts(self) -> list[tuple[str, int]]:
        return self.fabric_events.unlocated_hosts()

    def port_stats(self, dpid: int, stats: list[tuple[int, float, int, int]]) -> None:
        self.fabric_events.port_stats(dpid, stats)

    # ---- northbound changes (controller/job_ops.py) ---------------------------------
    def register_job(self, body: Any, credential: str,
                     done: threading.Event | None = None) -> dict[str, Any]:
        """Register a job and install its rules; ``credential`` is kept with the job
        (see controller.auth); ``done`` (optional) is set once the switches answered
        the barrier after them."""
        return self.job_ops.register_job(body, credential, done)

    def remove_job(self, job_id: str, done: threading.Event | None = None) -> dict[str, Any]:
        return self.job_ops.remove_job(job_id, done)

    def rank(self) -> dict[str, Any]:
        return self.job_ops.rank()

    def set_rank(self, body: Any, done: threading.Event | None = None) -> dict[str, Any]:
        """Switch the ranking rule at run time: ``{"rule": "remaining"}``. The flows
        are re-ranked at once; only the rules whose level changed are sent."""
        return self.job_ops.set_rank(body, done)

    # ---- progress reports (controller/reports.py) -----------------------------------
    def progress(self, job_id: str, body: Any,
                 t0: float | None = None, done: threading.Event | None = None,
                 credential: str | None = None, admit: Callable[[str], None] | None = None
                 ) -> Answer:
        """Returns the answer and, when flow mods were sent, an event (``done``, or a new
        one) set on their barrier replies (the API can wait on it).

        ``credential``: what the report's token hashes to, compared with the job's own
        when the report is recorded (401 if it differs; None: an in-process caller,
        nothing to compare). ``admit(job_id)``: called for a report found admissible
        (job, credential, worker and batch checked), just before it is recorded; it
        refuses by raising (the rate limit, controller.auth)."""
        return self.reports.progress(job_id, body, t0, done, credential, admit)

    def progress_many(self, reports: list[tuple[str, Any, float, threading.Event | None,
                                                str | None]],
                      admit: Callable[[str], None] | None = None) -> list[Answer | Refused]:
        """Reports (job, body, t0, done, credential) that arrived together, as the API
        hands them over: each is checked and recorded as :meth:`progress` does, then one
        reconcile covers them all. Per report: its answer, or the exception refusing it."""
        return self.reports.progress_many(reports, admit)

    # ---- northbound reads (controller/views.py) -------------------------------------
    def jobs(self) -> list[dict[str, Any]]:
        return self.views.jobs()

    def flows(self, job_id: str | None = None) -> dict[str, Any]:
        return self.views.flows(job_id)

    def rules(self) -> list[dict[str, Any]]:
        return self.views.rules()

    def links(self) -> dict[str, Any]:
        return self.views.links()

    def rules_by_level(self) -> dict[int, int]:
        return self.views.rules_by_level()

    def link_utilisation(self) -> list[dict[str, Any]]:
        return self.views.link_utilisation()

    def metrics_text(self) -> str:
        return self.views.metrics_text()

    # ---- persistence (controller/persistence.py) ------------------------------------
    def save_state(self) -> None:
        with self.shared.lock:
            self.persistence.save()
