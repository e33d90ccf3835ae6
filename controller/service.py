"""The controller's brain: registry + ranking + forwarding + rule diff, behind one lock.

Everything the northbound API and the os-ken app do goes through :class:`ControllerService`.
It owns no sockets: flow mods leave through a *sink* (the os-ken app in production, a
:class:`~controller.flowtable.FlowTable` in tests) so the whole controller logic runs in a
unit test with no switch. Each public method validates first and changes state only when
everything is valid (a rejected request changes nothing, and raises a
:mod:`controller.errors` exception). Tokens and rate limits are checked before a request
gets here (:mod:`controller.auth`); status codes are the REST API's.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from controller import rules as R
from controller.flowtable import FlowTable
from controller.forwarding import FabricView
from controller.linkstats import LinkStats
from controller.metrics import Metrics
from controller.ranking import FlowKey, ordered
from controller.rank_delta import FlowRanker, JobRanker
from controller.packets import ArpIn, arp_probe, arp_reply
from controller import job_rank
from controller.errors import (BadRequest, Conflict, NotFound, Refused, Unauthorized,
                               Unprocessable)
from controller.journal import ProgressJournal, journal_path
from controller.registry import (JOB_FIELDS, SIZE_FIELDS, DegenerateJob, Job, Registry,
                                 parse_job, parse_progress)
from sluice_common.errors import InputError
from topologies import Topology
from topologies.priority_classes import LEVELS, dscp_of_level

ARP_REQUEST = 1

LOG = logging.getLogger("sluice.controller")

# After a switch (re)connects with its flow table read back, rules the controller owns
# but does not want (yet) are kept until the fabric is rediscovered (every described
# link and host found) or this many seconds passed: a restarted controller knows no
# hosts at first, and deleting their forwarding rules would cut traffic until it does.
SETTLE_S = 3.0
# The progress journal is folded into the state file after this many reports
# (~60 bytes each: a few MB at most, replayed in well under a second).
JOURNAL_COMPACT_AT = 50_000


class FlowSink(Protocol):
    def send(self, mods: list[R.FlowMod], on_done: Callable[[], None] | None) -> None:
        """Send ``mods`` (grouped per switch, in order), then a barrier per touched switch;
        call ``on_done`` once every barrier is answered (at once when ``mods`` is empty)."""


class TableSink:
    """A sink that applies flow mods to an in-memory table (tests, dry runs)."""

    def __init__(self) -> None:
        self.table = FlowTable()
        self.sent: list[R.FlowMod] = []

    def send(self, mods, on_done=None) -> None:
        self.sent.extend(mods)
        self.table.apply(mods)
        if on_done:
            on_done()


@dataclass
class ControllerConfig:
    topology: Topology
    levels: int = LEVELS
    enforce: str = "dscp"
    # read by the northbound guard (controller.auth), not by the service
    admin_token: str = ""
    rate_per_s: float = 1000.0       # progress reports per job per second (token bucket)
    state_file: Path | None = None
    # progress | remaining | attained (controller.job_rank); None: the rule saved in the
    # state file (the last one chosen, also at run time), else the default
    rank: str | None = job_rank.DEFAULT_RULE
    attained_base_bytes: float = job_rank.ATTAINED_BASE_BYTES
    attained_factor: float = job_rank.ATTAINED_FACTOR


def _finite(x: float) -> float | None:
    return None if x == float("inf") else round(x)


class _PendingReport:
    """An accepted progress report waiting for the reconcile that covers it."""
    __slots__ = ("t0", "done", "changed", "covered", "moved")

    def __init__(self, t0: float, done=None, moved: tuple[str, str] = ("", "")) -> None:
        self.t0, self.done, self.changed, self.covered = t0, done or threading.Event(), 0, False
        self.moved = moved          # (job, worker) whose batch it moved


class ControllerService:
    def __init__(self, config: ControllerConfig, sink: FlowSink | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if config.enforce not in R.ENFORCE_MODES:
            raise InputError("argument --enforce", f"must be one of {', '.join(R.ENFORCE_MODES)}")
        if not 1 <= config.levels <= LEVELS:
            raise InputError("argument --levels", f"must be 1..{LEVELS}, got {config.levels}")
        if config.rank is not None and config.rank not in job_rank.RANK_RULES:
            raise InputError("argument --rank", f"must be one of {', '.join(job_rank.RANK_RULES)}, "
                             f"got {config.rank!r}")
        if not config.attained_base_bytes > 0 or not config.attained_factor > 1:
            raise InputError("argument --attained-base-mb/--attained-factor",
                             "need a base > 0 and a factor > 1")
        self.config = config
        self.sink = sink or TableSink()
        self.clock = clock
        self.lock = threading.RLock()
        self._reconcile_lock = threading.Lock()     # group commit of progress reports
        # Guards what progress reports touch (registry batches, credentials, the
        # journal, the pending list). Order: self.lock before _report_lock, never after.
        self._report_lock = threading.Lock()
        self._pending: list[_PendingReport] = []
        self.fabric = FabricView(config.topology)
        self.registry = Registry()
        self.installed = FlowTable()          # shadow of what the switches were told
        self.metrics = Metrics()
        self.linkstats = LinkStats()
        self.known_ips = {h.ip for h in config.topology.hosts}
        # job id -> the credential the northbound guard keeps with the job (the sha256
        # of its token): opaque here, stored and persisted with the job
        self._credentials: dict[str, str] = {}
        self._levels: dict[FlowKey, int] = {}
        self._fabric_dirty = True
        self._fwd_rules: list[R.Rule] = []
        self._next_ports: dict[int, dict[str, int]] = {}
        self._paths: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._flow_rules: dict[FlowKey, tuple[int, list[R.Rule]]] = {}
        self._static_rules: list[R.Rule] = []           # base + forwarding + admission
        self._flow_desired: dict[tuple, R.Rule] | None = None   # PS-flow rules last sent
        self._tables_exact = False
        self._share: dict[str, float] = {}    # job -> bytes share on its busiest link
        # Kept by the last full reconcile, so that a progress report re-ranks and re-sends
        # only what it moved (_reconcile_moved): the active rule's incremental ranker, and
        # which flows' rules share each PS-flow rule key (the most urgent one wins).
        self._ranker: FlowRanker | JobRanker | None = None
        self._flows_of_key: dict[tuple, list[FlowKey]] = {}
        # target ip -> [(dpid, port, asker mac, asker ip)] waiting for the target's reply
        self._pending_arp: dict[str, list[tuple[int, int, str, str]]] = {}
        self._settle_until: dict[int, float] = {}   # reconnected dpid -> clock() deadline
        self._journal: ProgressJournal | None = None
        self._unjournaled: list[tuple[str, str, int]] = []   # recorded, not yet written
        # snapshots: captures numbered in order; the latest written; one writer at a time
        self._captured = self._written = 0
        self._snapshot_lock = threading.Lock()
        self._compacting = False
        saved_rank = None
        if config.state_file:
            state = Path(config.state_file)
            if state.exists():
                saved_rank = self._load_state(state)
        if config.rank is None:
            config.rank = saved_rank or job_rank.DEFAULT_RULE
        if config.state_file:
            self._journal = ProgressJournal(journal_path(state))
            # Reports acknowledged after the last snapshot: replayed on top of it, then
            # folded into a fresh snapshot so the journal starts empty.
            if self._journal.has_lines():
                replayed = self._journal.replay(self.registry.report)
                LOG.info("replayed %d progress reports from %s", replayed,
                         self._journal.path)
                self._save_state()      # also drops a torn last line

    # ================================================================ fabric events ==
    def switch_up(self, dpid: int, ports: dict[int, str],
                  table: list[R.Rule] | None = None) -> None:
        """A switch connected. ``table``: the rules it holds (read back with a flow-stats
        request); only the difference is sent. Without it the switch is cleared first."""
        with self.lock:
            if dpid not in self.fabric.name_of_dpid:
                LOG.warning("switch dpid %016x is not in the topology; ignoring it", dpid)
                return
            # A reconnect keeps what LLDP/ARP found (only links/hosts on vanished ports
            # are dropped) so the full table goes back at once instead of after rediscovery.
            self.fabric.prune_ports(dpid, ports)
            for key in list(self.installed.of_switch(dpid)):
                self.installed.rules.pop(key)
            self.fabric.connected.add(dpid)
            self._fabric_dirty = True
            if table is None:
                clear = R.FlowMod("clear", R.Rule(dpid, 0, (), (), 0))
                self._reconcile(prefix=[clear])
                return
            self.installed.apply(R.FlowMod("add", r) for r in table if r.dpid == dpid)
            self._settle_until[dpid] = self.clock() + SETTLE_S
            self._reconcile()

    def tick(self) -> None:
        """Periodic: once a reconnected switch's settling time is over, delete what it
        still holds that the controller does not want."""
        with self.lock:
            now = self.clock()
            expired = [d for d, t in self._settle_until.items() if t <= now]
            for dpid in expired:
                del self._settle_until[dpid]
            if expired:
                self._reconcile()

    def _fabric_rediscovered(self) -> bool:
        f = self.fabric
        return len(f.links) >= 2 * len(f.described_pairs) and len(f.hosts) == len(self.known_ips)

    def _keep_while_settling(self) -> Callable[[R.Rule], bool] | None:
        if not self._settle_until:
            return None
        if self._fabric_rediscovered():
            self._settle_until.clear()
            return None
        settling = set(self._settle_until)
        owned = {R.COOKIE_BASE, R.COOKIE_FORWARDING, R.COOKIE_ADMISSION} | {
            j.cookie for j in self.registry.jobs.values()}
        return lambda r: r.dpid in settling and r.cookie in owned

    def update_ports(self, dpid: int, ports: dict[int, str]) -> None:
        """The port list of a connected switch changed: drop links/hosts on lost ports."""
        with self.lock:
            self.fabric.prune_ports(dpid, ports)
            self._fabric_dirty = True
            self._reconcile()

    def switch_down(self, dpid: int) -> None:
        with self.lock:
            self._settle_until.pop(dpid, None)
            self.fabric.switch_down(dpid)
            for key in list(self.installed.of_switch(dpid)):
                self.installed.rules.pop(key)
            self.linkstats.forget_switch(dpid)
            self._fabric_dirty = True
            self._reconcile()

    def link_seen(self, src: tuple[int, int], dst: tuple[int, int]) -> None:
        with self.lock:
            if self.fabric.add_link(src, dst):
                LOG.info("link %s:%d <-> %s:%d", self._name(src[0]), src[1],
                         self._name(dst[0]), dst[1])
                self._fabric_dirty = True
                self._reconcile()
                self._save_state()   # a restart then routes at once (no rediscovery wait)

    def host_seen(self, ip: str, dpid: int, port: int, mac: str) -> bool:
        with self.lock:
            if self.fabric.learn_host(ip, dpid, port, mac):
                LOG.info("host %s (%s) at %s port %d", ip, mac, self._name(dpid), port)
                self._fabric_dirty = True
                self._reconcile()
                self._save_state()
                return True
            return False

    def host_mac(self, ip: str) -> str | None:
        with self.lock:
            loc = self.fabric.hosts.get(ip)
            return loc.mac if loc else None

    def on_arp(self, dpid: int, in_port: int, a: ArpIn) -> list[tuple[int, int, bytes]]:
        """Proxy ARP. Returns packet-outs (dpid, port, frame): the answer to the asker when
        the target is located, else ARP probes towards the target (the asker is answered
        as soon as the target replies). Nothing is ever flooded."""
        if a.from_controller:
            return []          # our own probe came back through a switch link
        outs: list[tuple[int, int, bytes]] = []
        with self.lock:
            self.metrics.inc("sluice_arp_packets_total")
            if a.src_ip in self.known_ips:
                self.host_seen(a.src_ip, dpid, in_port, a.src_mac)
                here = self.fabric.hosts.get(a.src_ip)
                if here is not None and (here.dpid, here.port) == (dpid, in_port):
                    for ask in self._pending_arp.pop(a.src_ip, []):
                        outs.append((ask[0], ask[1], arp_reply(here.mac, a.src_ip, ask[2], ask[3])))
            if a.opcode != ARP_REQUEST or a.src_ip not in self.known_ips \
                    or a.dst_ip not in self.known_ips or a.dst_ip == a.src_ip:
                return outs
            target = self.fabric.hosts.get(a.dst_ip)
            if target is not None:
                outs.append((dpid, in_port, arp_reply(target.mac, a.dst_ip, a.src_mac, a.src_ip)))
                return outs
            pending = self._pending_arp.setdefault(a.dst_ip, [])
            ask = (dpid, in_port, a.src_mac, a.src_ip)
            if ask not in pending and len(pending) < 64:
                pending.append(ask)
            outs += self.probes_for(a.dst_ip)
        return outs

    def probes_for(self, ip: str) -> list[tuple[int, int, bytes]]:
        """ARP probes for ``ip`` out of its ToR's edge ports (never a switch link)."""
        with self.lock:
            tor = self.fabric.tor_dpid_of_ip.get(ip)
            if tor not in self.fabric.connected:
                return []
            frame = arp_probe(ip)
            return [(tor, p, frame) for p in self.fabric.edge_ports(tor)]

    def unlocated_hosts(self) -> list[tuple[str, int]]:
        """(ip, ToR dpid) of described hosts not located yet, whose ToR is connected."""
        with self.lock:
            return [(ip, tor) for ip, tor in sorted(self.fabric.tor_dpid_of_ip.items())
                    if ip not in self.fabric.hosts and tor in self.fabric.connected]

    def port_stats(self, dpid: int, stats: list[tuple[int, float, int, int]]) -> None:
        with self.lock:
            for port, t, tx, rx in stats:
                self.linkstats.update(dpid, port, t, tx, rx)

    def _name(self, dpid: int) -> str:
        return self.fabric.name_of_dpid.get(dpid, f"{dpid:016x}")

    # ================================================================ northbound ==
    # Callers are authorised (controller.auth): these methods check the request against
    # the controller's state only, and refuse with controller.errors exceptions.
    def register_job(self, body: Any, credential: str,
                     done: threading.Event | None = None) -> dict[str, Any]:
        """Register a job and install its rules; ``credential`` is kept with the job
        (see controller.auth); ``done`` (optional) is set once the switches answered
        the barrier after them."""
        try:
            job = parse_job(body, self.known_ips)
        except DegenerateJob as err:
            raise Unprocessable(str(err), err.field)
        except InputError as err:
            raise BadRequest(str(err))
        with self.lock:
            with self._report_lock:
                try:
                    self.registry.check_new(job)
                except InputError as err:
                    raise Conflict(str(err))
                self.registry.add(job)
                self._share.pop(job.id, None)
                self._credentials[job.id] = credential
            self.metrics.inc("sluice_jobs_registered_total")
            self._reconcile(on_done=done.set if done else None)
            self._save_state()
            LOG.info("job %s registered: %d servers, %d workers, cookie 0x%x", job.id,
                     len(job.servers), len(job.workers), job.cookie)
            return job.to_dict()

    def remove_job(self, job_id: str, done: threading.Event | None = None) -> dict[str, Any]:
        with self.lock:
            with self._report_lock:
                if job_id not in self.registry.jobs:
                    raise NotFound(f"no job '{job_id}'")
                job = self.registry.remove(job_id)
                self._share.pop(job_id, None)
                self._credentials.pop(job_id, None)
            mods = self._reconcile(on_done=done.set if done else None)
            self._save_state()
            LOG.info("job %s removed", job_id)
            return {"id": job_id, "removed_rules": sum(
                1 for m in mods if m.command == "delete" and m.rule.cookie == job.cookie)}

    def progress(self, job_id: str, body: Any,
                 t0: float | None = None, done: threading.Event | None = None,
                 credential: str | None = None, admit: Callable[[str], None] | None = None
                 ) -> tuple[dict[str, Any], threading.Event | None]:
        """Returns the answer and, when flow mods were sent, an event (``done``, or a new
        one) set on their barrier replies (the API can wait on it).

        ``credential``: what the report's token hashes to, compared with the job's own
        when the report is recorded (401 if it differs; None: an in-process caller,
        nothing to compare). ``admit(job_id)``: called for a report found admissible
        (job, credential, worker and batch checked), just before it is recorded; it
        refuses by raising (the rate limit, controller.auth)."""
        mine = self._record(job_id, body, t0, done, credential, admit)
        self._write_journal()
        if isinstance(mine, _PendingReport):
            self._commit(mine)
        return self._answer(mine)

    def progress_many(self, reports: list[tuple[str, Any, float, threading.Event | None,
                                                str | None]],
                      admit: Callable[[str], None] | None = None
                      ) -> list[tuple[dict[str, Any], threading.Event | None] | Refused]:
        """Reports (job, body, t0, done, credential) that arrived together, as the API
        hands them over: each is checked and recorded as :meth:`progress` does, then one
        reconcile covers them all. Per report: its answer, or the exception refusing it."""
        recorded: list[_PendingReport | str | Refused] = []
        for job_id, body, t0, done, credential in reports:
            try:
                recorded.append(self._record(job_id, body, t0, done, credential, admit))
            except Refused as err:
                recorded.append(err)
        self._write_journal()
        last = next((r for r in reversed(recorded) if isinstance(r, _PendingReport)), None)
        if last is not None:        # covers every report recorded before it
            self._commit(last)
        return [r if isinstance(r, Refused) else self._answer(r) for r in recorded]

    def _record(self, job_id: str, body: Any, t0: float | None,
                done: threading.Event | None, credential: str | None = None,
                admit: Callable[[str], None] | None = None) -> "_PendingReport | str":
        """Check and record one report: the pending report waiting for its reconcile,
        or the result of a report that changes nothing (stale)."""
        t0 = self.clock() if t0 is None else t0
        # Only the small report lock: reports are recorded (and journaled) while a
        # reconcile holds the big lock, and the next reconcile covers them all. The
        # checks are made under it too: registering or removing a job takes it, so the
        # job a report is checked against is the job it is recorded on.
        with self._report_lock:
            job = self.registry.jobs.get(job_id)
            if job is None:
                raise NotFound(f"no job '{job_id}'")
            if credential is not None and not (
                    credential and hmac.compare_digest(credential, self._credentials[job_id])):
                raise Unauthorized("missing or wrong job token")
            try:
                worker, batch = parse_progress(body, job)
            except InputError as err:
                self.metrics.inc("sluice_progress_reports_total", result="rejected")
                raise BadRequest(str(err))
            if admit is not None:
                admit(job_id)          # the rate limit: only admissible reports use it up
            result = self.registry.report(job_id, worker, batch)
            self.metrics.inc("sluice_progress_reports_total", result=result)
            if result == "accepted" and self._journal is not None:
                # written (_write_journal) before the answer leaves: a SIGKILL after the
                # ack loses nothing
                self._unjournaled.append((job_id, worker, batch))
            if result != "accepted":
                return result
            mine = _PendingReport(t0, done, (job_id, worker))
            self._pending.append(mine)
            return mine

    def _write_journal(self) -> None:
        """Journal what was recorded, in one write; returns once the reports this thread
        recorded are written (by it or by a thread that got there first)."""
        if self._journal is not None:
            with self._report_lock:
                lines, self._unjournaled = self._unjournaled, []
                self._journal.append_many(lines)

    def _commit(self, mine: "_PendingReport") -> None:
        """Group commit: one reconcile covers every report recorded before it started.
        Under load, reports arriving while a reconcile runs are covered together by the
        next one, so the cost per report falls as the rate rises; alone, a report gets
        its own reconcile at once."""
        with self._reconcile_lock:
            if not mine.covered:         # else a reconcile that started after it ran
                with self.lock:
                    with self._report_lock:
                        batch, self._pending = self._pending, []
                    if batch:
                        self._reconcile_batch(batch)
                    if self._journal is not None and not self._compacting \
                            and self._journal.entries >= JOURNAL_COMPACT_AT:
                        self._compact_in_background()

    @staticmethod
    def _answer(mine: "_PendingReport | str") -> tuple[dict[str, Any], threading.Event | None]:
        if isinstance(mine, str):
            return {"result": mine, "changed_rules": 0}, None
        if not mine.changed:
            return {"result": "accepted", "changed_rules": 0}, None
        return {"result": "accepted", "changed_rules": mine.changed}, mine.done

    def _reconcile_batch(self, batch: list["_PendingReport"]) -> None:
        def finished() -> None:
            now = self.clock()
            for p in batch:
                self.metrics.observe_reaction(now - p.t0)
                p.done.set()

        mods = self._reconcile_moved({p.moved for p in batch}, on_done=finished)
        if mods is None:        # no incremental state to build on: the full reconcile
            mods = self._reconcile(on_done=finished, only_if_levels_changed=True)
        for p in batch:
            p.changed, p.covered = len(mods), True
        if len(batch) > 1:
            self.metrics.inc("sluice_progress_reports_coalesced_total", len(batch) - 1)

    def rank(self) -> dict[str, Any]:
        with self.lock:
            return {"rule": self.config.rank, "rules": list(job_rank.RANK_RULES)}

    def set_rank(self, body: Any, done: threading.Event | None = None) -> dict[str, Any]:
        """Switch the ranking rule at run time: ``{"rule": "remaining"}``. The flows
        are re-ranked at once; only the rules whose level changed are sent."""
        if not isinstance(body, dict) or set(body) != {"rule"}:
            raise BadRequest("API body: must be a JSON object {\"rule\": NAME}")
        rule = body["rule"]
        if rule not in job_rank.RANK_RULES:
            raise BadRequest(f"API body: field 'rule': must be one of "
                             f"{', '.join(job_rank.RANK_RULES)}, got {rule!r}")
        with self.lock:
            old, self.config.rank = self.config.rank, rule
            mods = self._reconcile(on_done=done.set if done else None)
            if rule != old:
                self._save_state()          # a restart keeps the rule chosen here
                self.metrics.inc("sluice_rank_changes_total")
                LOG.info("ranking rule %s -> %s (%d flow mods)", old, rule, len(mods))
            return {"rule": rule, "previous": old, "changed_rules": len(mods)}

    def jobs(self) -> list[dict[str, Any]]:
        with self.lock, self._report_lock:
            out = []
            for j in self.registry.jobs.values():
                load = self._job_load(j)
                levels = {self._levels.get(f) for f in j.flows()} - {None}
                out.append({**j.to_dict(), "done_batches": load.done_batches,
                            "remaining_bytes": _finite(job_rank.remaining_bytes(load)),
                            "attained_bytes": round(job_rank.attained_bytes(load)),
                            "levels": sorted(levels)})
            return out

    def flows(self, job_id: str | None = None) -> dict[str, Any]:
        with self.lock:
            if job_id is not None and job_id not in self.registry.jobs:
                raise NotFound(f"no job '{job_id}'")
            cookie_of = {j.id: j.cookie for j in self.registry.jobs.values()}
            by_match: dict[tuple, list[R.Rule]] = {}
            for r in self.installed.rules.values():
                if r.priority in (R.PRIO_JOB_FLOW, R.PRIO_JOB_ACK):  # keyed without in_port
                    match = tuple(kv for kv in r.match if kv[0] != "in_port")
                    by_match.setdefault(match, []).append(r)

            def installed(match: tuple, job: str) -> list[dict[str, Any]]:
                return [r.to_json() for r in by_match.get(match, [])
                        if r.cookie == cookie_of[job]]

            out = []
            with self._report_lock:
                snapshot = list(self.registry.flows_with_batches())
            for flow, batch in ordered(snapshot):
                if job_id is not None and flow.job != job_id:
                    continue
                level = self._levels.get(flow)
                out.append({"job": flow.job, "kind": flow.kind, "worker": flow.worker,
                            "server": flow.server, "src": flow.src_ip, "dst": flow.dst_ip,
                            "dst_port": flow.dst_port, "batch": batch, "level": level,
                            "dscp": dscp_of_level(level) if level is not None else None,
                            "rules": installed(R.flow_match(flow), flow.job),
                            "ack_rules": installed(R.ack_match(flow), flow.job)})
            return {"enforce": self.config.enforce, "levels": self.config.levels,
                    "rank": self.config.rank, "flows": out}

    def rules(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r.to_json() for r in sorted(self.installed.rules.values(),
                                                key=lambda r: (r.dpid, r.table, -r.priority, r.match))]

    def links(self) -> dict[str, Any]:
        with self.lock:
            hosts_at = {(l.dpid, l.port): self.fabric.host_by_ip[ip].name
                        for ip, l in self.fabric.hosts.items()}
            out = []
            for (dpid, port), rate in sorted(self.linkstats.rates.items()):
                peer = self.fabric.links.get((dpid, port))
                entry = {"switch": self._name(dpid), "dpid": dpid, "port": port,
                         "port_name": self.fabric.ports.get(dpid, {}).get(port),
                         "tx_bytes_per_s": round(rate.tx_bps, 1),
                         "rx_bytes_per_s": round(rate.rx_bps, 1),
                         "tx_bytes": rate.tx_bytes, "rx_bytes": rate.rx_bytes,
                         "peer": self._name(peer[0]) if peer else hosts_at.get((dpid, port))}
                out.append(entry)
            return {"ports": out}

    def rules_by_level(self) -> dict[int, int]:
        """Job flow rules wanted per priority level (0 = most urgent)."""
        with self.lock:
            out: dict[int, int] = {}
            for level, rules in self._flow_rules.values():
                out[level] = out.get(level, 0) + len(rules)
            return out

    def link_utilisation(self) -> list[dict[str, Any]]:
        """Per switch port with a known peer: send rate / capacity of its link (the
        emulated capacity, bw * emulation.bw_scale, when the fabric is Mininet)."""
        topo = self.config.topology
        out = []
        for port in self.links()["ports"]:
            name, peer = port["switch"], port["peer"]
            if peer is None or not topo.graph.has_edge(name, peer):
                continue
            capacity = topo.graph.edges[name, peer]["bw"] * topo.emulation_bw_scale
            tx_mbps = port["tx_bytes_per_s"] * 8 / 1e6
            out.append({"switch": name, "port": port["port"], "peer": peer,
                        "capacity_mbps": capacity, "tx_mbps": tx_mbps,
                        "utilisation": tx_mbps / capacity})
        return out

    def metrics_text(self) -> str:
        m = self.metrics
        with self.lock:
            m.set("sluice_jobs_active", len(self.registry.jobs))
            m.set("sluice_switches_connected", len(self.fabric.connected))
            m.set("sluice_hosts_located", len(self.fabric.hosts))
            m.set("sluice_links_discovered", len(self.fabric.links) // 2)
            m.set("sluice_rules_installed", len(self.installed.rules))
            m.clear("sluice_rules_by_level")
            by_level = self.rules_by_level()
            # every level present, 0 included: a rate() over them must not see gaps
            for level in sorted(set(range(self.config.levels)) | set(by_level)):
                m.set("sluice_rules_by_level", by_level.get(level, 0), level=str(level))
            for name in ("sluice_port_tx_bytes", "sluice_port_rx_bytes",
                         "sluice_port_tx_bytes_per_second", "sluice_link_utilisation_ratio"):
                m.clear(name)       # ports of a switch that went away must not linger
            for rule in job_rank.RANK_RULES:   # one series per rule, 1 for the active one
                m.set("sluice_rank_rule", int(rule == self.config.rank), rule=rule)
            for (dpid, port), rate in self.linkstats.rates.items():
                labels = {"switch": self._name(dpid), "port": str(port)}
                m.set("sluice_port_tx_bytes", rate.tx_bytes, **labels)
                m.set("sluice_port_rx_bytes", rate.rx_bytes, **labels)
                m.set("sluice_port_tx_bytes_per_second", rate.tx_bps, **labels)
            utilisation = self.link_utilisation()
            for entry in utilisation:
                m.set("sluice_link_utilisation_ratio", entry["utilisation"],
                      switch=entry["switch"], port=str(entry["port"]), peer=entry["peer"])
            m.set("sluice_bottleneck_utilisation_ratio",
                  max((e["utilisation"] for e in utilisation), default=0.0))
        return self.metrics.render()

    # ================================================================ core ==
    def _reconcile(self, prefix: list[R.FlowMod] | None = None,
                   on_done: Callable[[], None] | None = None,
                   only_if_levels_changed: bool = False) -> list[R.FlowMod]:
        """Compute the desired rules of every connected switch, diff against what was
        installed, send only the difference. Caller holds the lock."""
        fabric_changed = self._fabric_dirty
        connected = self.fabric.connected
        if fabric_changed:
            self._next_ports = self.fabric.next_ports()
            self._fwd_rules = R.forwarding_rules(self._next_ports) + R.admission_rules(
                ((l.dpid, l.port, ip) for ip, l in self.fabric.hosts.items()),
                self.fabric.links)
            # switches whose control channel is down are routed through, but get no rules
            self._static_rules = [r for dpid in sorted(connected) for r in R.base_rules(dpid)]
            self._static_rules += [r for r in self._fwd_rules if r.dpid in connected]
            self._paths.clear()
            self._flow_rules.clear()
            self._share.clear()
            self._fabric_dirty = False
        levels = self._compute_levels()
        if only_if_levels_changed and not fabric_changed and levels == self._levels:
            return []
        self._levels = levels
        cookie_of = {j.id: j.cookie for j in self.registry.jobs.values()}
        # Rules per flow are cached by level: a report rebuilds only the flows it moved.
        flow_rules: dict[FlowKey, tuple[int, list[R.Rule]]] = {}
        for flow, level in levels.items():
            cached = self._flow_rules.get(flow)
            if cached is None or cached[0] != level:
                cached = (level, self._rules_of(flow, level, cookie_of[flow.job]))
            flow_rules[flow] = cached
        self._flow_rules = flow_rules
        # Least urgent first: flows sharing one match (two workers of a job on one host
        # push to the same server:port) get one rule, and the most urgent level wins.
        flow_desired: dict[tuple, R.Rule] = {}
        for _level, rules in sorted(flow_rules.values(), key=lambda lr: -lr[0]):
            for r in rules:
                if r.dpid in connected:
                    flow_desired[r.key] = r
        self._flows_of_key = {}
        for flow, (_level, rules) in flow_rules.items():
            for r in rules:
                if r.dpid in connected:
                    self._flows_of_key.setdefault(r.key, []).append(flow)
        keep = self._keep_while_settling()
        if prefix is None and not fabric_changed and keep is None \
                and self._flow_desired is not None and self._tables_exact:
            # Only PS-flow rules can have changed (the fabric did not): diff just those
            # against what they were, not the whole table (what a progress report costs).
            mods = R.diff(self._flow_desired, flow_desired.values())
        else:
            desired = self._static_rules + list(flow_desired.values())
            mods = list(prefix or []) + R.diff(self.installed.rules, desired, keep=keep)
        self._flow_desired = flow_desired
        # rules kept while settling make the tables differ from desired: next time a
        # full diff, so that they go as soon as they are no longer kept
        self._tables_exact = keep is None
        self.installed.apply(mods)
        self.metrics.inc("sluice_flow_mods_total",
                         sum(1 for m in mods if m.command != "clear"))
        self.sink.send(mods, on_done)
        return mods

    def _reconcile_moved(self, moved: set[tuple[str, str]],
                         on_done: Callable[[], None] | None) -> list[R.FlowMod] | None:
        """Progress reports of ``moved`` (job, worker) pairs: re-rank incrementally and
        rebuild, diff and send only the rules of the flows whose level moved (O(moved),
        not O(flows)). None when there is no exact incremental state to build on (the
        fabric changed, a switch is settling, ...): the caller reconciles in full.
        Caller holds the lock."""
        ranker = self._ranker
        if ranker is None or self._fabric_dirty or self._settle_until \
                or not self._tables_exact or self._flow_desired is None:
            return None
        jobs = self.registry.jobs
        try:
            with self._report_lock:           # batch numbers are recorded under it
                if isinstance(ranker, FlowRanker):
                    reported = []
                    for job_id, worker in moved:
                        job = jobs.get(job_id)
                        if job is not None:
                            batch = job.batch_of(worker)
                            reported += [(f, batch) for f in job.flows() if f.worker == worker]
                    changed = ranker.update(reported)
                else:
                    by_job = ranker.update([self._job_load(jobs[j])
                                            for j in {j for j, _ in moved} if j in jobs])
                    changed = {f: level for j, level in by_job.items() for f in jobs[j].flows()}
        except KeyError:       # a flow or job the ranker was not built with: start over
            self._ranker = None
            return None
        if not changed:
            return []
        connected, keys = self.fabric.connected, set()
        for flow, level in changed.items():
            self._levels[flow] = level
            rules = self._rules_of(flow, level, jobs[flow.job].cookie)
            self._flow_rules[flow] = (level, rules)
            keys.update(r.key for r in rules if r.dpid in connected)
        # flows sharing a rule key: the most urgent one's rule is the one wanted
        wanted = []
        for key in keys:
            best = min(self._flows_of_key[key], key=lambda f: self._flow_rules[f][0])
            wanted += [r for r in self._flow_rules[best][1] if r.key == key]
        mods = R.diff({k: self._flow_desired[k] for k in keys if k in self._flow_desired},
                      wanted)
        self._flow_desired.update((r.key, r) for r in wanted)
        self.installed.apply(mods)
        self.metrics.inc("sluice_flow_mods_total", len(mods))
        self.sink.send(mods, on_done)
        return mods

    def _rules_of(self, flow: FlowKey, level: int, cookie: int) -> list[R.Rule]:
        """``flow``'s rules at ``level``: its data direction and its ACKs coming back, and
        the same for the control flow that rides on it (Job.control_flow)."""
        control = self.registry.jobs[flow.job].control_flow(flow)
        enforce, out = self.config.enforce, []
        for f in (flow,) if control is None else (flow, control):
            src, dst = self.fabric.hosts.get(f.src_ip), self.fabric.hosts.get(f.dst_ip)
            out += R.job_flow_rules(f, level, self._hops(f.src_ip, f.dst_ip), cookie,
                                    enforce, src.port if src else None)
            out += R.job_ack_rules(f, level, self._hops(f.dst_ip, f.src_ip), cookie,
                                   enforce, dst.port if dst else None)
        return out

    def _hops(self, src: str, dst: str) -> list[tuple[int, int]]:
        hops = self._paths.get((src, dst))
        if hops is None:
            hops = self.fabric.path(src, dst, self._next_ports)
            self._paths[(src, dst)] = hops
        return hops

    def _job_load(self, job: Job) -> job_rank.JobLoad:
        share = self._share.get(job.id)
        if share is None:
            # Busiest link of the job: most of its flows on one (switch, out port).
            on_link: dict[tuple[int, int], int] = {}
            for f in job.flows():
                for hop in self._hops(f.src_ip, f.dst_ip):
                    on_link[hop] = on_link.get(hop, 0) + 1
            share = job_rank.bottleneck_share(max(on_link.values(), default=0),
                                              len(job.workers), len(job.servers))
            self._share[job.id] = share
        return job_rank.JobLoad(job.id, job.cookie & 0xFFFFFFFF, job.done_batches(),
                                job.total_batches, job.bytes_per_batch, share)

    def _compute_levels(self) -> dict[FlowKey, int]:
        """flow -> level under the active ranking rule (caller holds the lock)."""
        rule, n = self.config.rank, self.config.levels
        # The ranker computes the full levels and keeps its state for the reports after
        # (its levels equal assign_levels / remaining_levels / attained_levels).
        if rule == job_rank.PROGRESS:
            with self._report_lock:           # batch numbers are recorded under it
                self._ranker = FlowRanker(self.registry.flows_with_batches(), n)
            return dict(self._ranker.levels)
        with self._report_lock:
            loads = [self._job_load(j) for j in self.registry.jobs.values()]
        self._ranker = JobRanker(rule, loads, n, self.config.attained_base_bytes,
                                 self.config.attained_factor)
        by_job = self._ranker.levels
        return {f: by_job[j.id] for j in self.registry.jobs.values() for f in j.flows()}

    # ================================================================ persistence ==
    def _save_state(self) -> None:
        """Write the state file now (caller holds the lock): a registration, removal,
        rank rule or fabric change is on disk when this returns."""
        if self.config.state_file:
            self._write_snapshot(*self._capture())

    def _capture(self) -> tuple[int, dict[str, Any]]:
        """Copy the state and rotate the journal in one step for the reports (caller
        holds the lock: the fabric is read too); (sequence number, data to write)."""
        with self._report_lock:
            data = {"version": 1, "rank": self.config.rank, "jobs": [
                {**{k: v for k, v in j.to_dict().items() if k != "cookie"},
                 "cookie": j.cookie, "token_sha256": self._credentials[j.id]}
                for j in self.registry.jobs.values()],
                "fabric": self.fabric.to_dict()}
            if self._journal is not None:
                self._journal.rotate()
            self._captured += 1
            return self._captured, data

    def _write_snapshot(self, seq: int, data: dict[str, Any]) -> None:
        """Write a captured state (no report lock held: reports go on meanwhile); the
        journal's rotated lines are dropped once the latest capture is on disk."""
        with self._snapshot_lock:
            if seq <= self._written:
                return          # a later capture is on disk already
            path = Path(self.config.state_file)
            tmp = path.with_name(path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                # no indent: the C encoder (a pretty-printed file costs ~10x the CPU)
                json.dump(data, f, separators=(",", ":"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            self._written = seq
            # Only now is every rotated report inside the snapshot (a crash before this
            # line replays them again: reports are idempotent, batches only go up).
            with self._report_lock:
                if self._journal is not None and self._captured == seq:
                    self._journal.drop_rotated()

    def _compact_in_background(self) -> None:
        """Fold the journal into a snapshot without holding up reports: captured here
        (caller holds the lock), written by a thread of its own."""
        self._compacting = True
        seq, data = self._capture()

        def write() -> None:
            try:
                self._write_snapshot(seq, data)
            except OSError:
                LOG.exception("could not write the state file (the journal keeps the reports)")
            finally:
                self._compacting = False

        threading.Thread(target=write, name="sluice-snapshot", daemon=True).start()

    def save_state(self) -> None:
        with self.lock:
            self._save_state()

    def _load_state(self, path: Path) -> str | None:
        """Restore jobs (endpoints, cookies, batches, token hashes) after a restart;
        returns the ranking rule saved (None in files written before it was saved).
        A bad file is an InputError: the controller refuses to start."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise InputError(str(path), f"cannot read state file: {err}")
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
            raise InputError(str(path), "not a sluice controller state file", field="jobs")
        rank = data.get("rank")
        if rank is not None and rank not in job_rank.RANK_RULES:
            raise InputError(str(path), f"must be one of {', '.join(job_rank.RANK_RULES)}, "
                             f"got {rank!r}", field="rank")
        registry = Registry()
        tokens = {}
        for i, raw in enumerate(data["jobs"]):
            if not isinstance(raw, dict):
                raise InputError(str(path), "must be an object", element=f"job #{i + 1}")
            extra = {k: raw.get(k) for k in ("cookie", "token_sha256", "batches")}
            body = {k: raw.get(k) for k in JOB_FIELDS if raw.get(k) is not None}
            job = parse_job(body, self.known_ips, source=str(path))
            if not isinstance(extra["cookie"], int) or not isinstance(extra["token_sha256"], str):
                raise InputError(str(path), "missing cookie or token_sha256",
                                 element=f"job '{job.id}'")
            batches = extra["batches"] or {}
            if not isinstance(batches, dict) or not all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    for v in batches.values()):
                raise InputError(str(path), "must map worker ids to batches >= 0",
                                 element=f"job '{job.id}'", field="batches")
            job.batches = dict(batches)
            try:
                registry.add(job, cookie=extra["cookie"])
            except InputError as err:
                raise InputError(str(path), err.reason, element=err.element)
            tokens[job.id] = extra["token_sha256"]
        self.registry, self._credentials = registry, tokens
        if data.get("fabric") is not None:
            try:
                self.fabric.restore(data["fabric"])
            except (AttributeError, KeyError, TypeError, ValueError) as err:
                raise InputError(str(path), f"bad fabric entry: {err}", field="fabric")
        LOG.info("restored %d jobs from %s", len(tokens), path)
        return rank
