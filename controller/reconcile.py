"""From the controller's state to the switches: desired rules, diffed against what was
installed, only the difference sent.

Two ways, one result: :meth:`Reconciler.full` recomputes every connected switch's rules
(the fabric changed, the rule changed; a fabric change rebuilds only the switches'
forwarding and the flows' rules whose routes moved); :meth:`Reconciler.moved` (progress
reports), :meth:`~Reconciler.job_added` and :meth:`~Reconciler.job_removed` (a job came
or went) re-rank incrementally and rebuild only the rules of the flows that came, went
or whose level moved (O(moved), not O(flows)). Callers hold the shared lock.
"""

from __future__ import annotations

from typing import Callable

from sluice_common import job_rank, rank_rules
from controller import pods
from controller import rules as R
from controller.rank_delta import FlowRanker, JobRanker
from controller.ranking import FlowKey
from controller.registry import Job
from controller.settling import Settling
from controller.state import Shared


class Reconciler:
    def __init__(self, shared: Shared, settling: Settling) -> None:
        self.s, self.settling = shared, settling
        self.levels: dict[FlowKey, int] = {}
        self.fabric_dirty = True
        self._next_ports: dict[int, dict[str, int]] = {}
        self._paths: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self.flow_rules: dict[FlowKey, tuple[int, list[R.Rule]]] = {}
        self._static_rules: list[R.Rule] = []           # base + forwarding + admission
        self._flow_desired: dict[tuple, R.Rule] | None = None   # PS-flow rules last sent
        self._tables_exact = False
        self._share: dict[str, float] = {}    # job -> bytes share on its busiest link
        # Kept by the last full reconcile, so that a progress report re-ranks and re-sends
        # only what it moved (moved()): the active rule's incremental ranker, and which
        # flows' rules share each PS-flow rule key (the most urgent one wins).
        self._ranker: FlowRanker | JobRanker | None = None
        self._flows_of_key: dict[tuple, list[FlowKey]] = {}
        # What each flow's cached rules were built from (_inputs_of), and each switch's
        # forwarding rules with the routes they were built from: a fabric change rebuilds
        # only what it moved (a switch connecting no longer rebuilds every rule).
        self._rule_inputs: dict[FlowKey, tuple] = {}
        self._forwarding_of: dict[int, tuple[dict[str, int], list[R.Rule]]] = {}
        # a controller per pod: owned dpid -> {other pod's prefix: out port}
        self.prefix_ports: dict[int, dict[str, int]] = {}

    @property
    def ranker(self) -> FlowRanker | JobRanker | None:
        """The active rule's incremental ranker as the last reconcile left it."""
        return self._ranker

    def forget_switch(self, dpid: int) -> None:
        """The switch (re)connected or went: what it was told is no longer known."""
        for key in list(self.s.installed.of_switch(dpid)):
            self.s.installed.rules.pop(key)
        self.fabric_dirty = True

    def forget_job(self, job_id: str) -> None:
        self._share.pop(job_id, None)

    def full(self, prefix: list[R.FlowMod] | None = None,
             on_done: Callable[[], None] | None = None,
             only_if_levels_changed: bool = False) -> list[R.FlowMod]:
        """Compute the desired rules of every connected switch, diff against what was
        installed, send only the difference."""
        s = self.s
        fabric_changed = self.fabric_dirty
        connected = s.fabric.connected
        if fabric_changed:
            self._next_ports = s.fabric.next_ports()
            # switches whose control channel is down are routed through, but get no rules
            fwd_rules = self._forwarding(connected) + R.admission_rules(
                ((l.dpid, l.port, ip) for ip, l in s.fabric.hosts.items()), s.fabric.links,
                s.config.trust_host_dscp)
            if s.config.scope is not None:
                fwd_rules = self._pod_routes(fwd_rules)
            self._static_rules = [r for dpid in sorted(connected) for r in R.base_rules(dpid)]
            self._static_rules += [r for r in fwd_rules if r.dpid in connected]
            # the flows' rules are kept where their routes and ports did not move (a
            # switch connecting reroutes some flows, not all): checked below
            self._paths.clear()
            self._share.clear()
            self.fabric_dirty = False
        levels = self._compute_levels()
        if only_if_levels_changed and not fabric_changed and levels == self.levels:
            return []
        self.levels = levels
        cookie_of = {j.id: j.cookie for j in s.registry.jobs.values()}
        # Rules per flow are cached by level: a report rebuilds only the flows it moved.
        flow_rules: dict[FlowKey, tuple[int, list[R.Rule]]] = {}
        for flow, level in levels.items():
            cached = self.flow_rules.get(flow)
            if cached is not None and fabric_changed and \
                    self._rule_inputs.get(flow) != self._inputs_of(flow, cookie_of[flow.job]):
                cached = None
            if cached is None or cached[0] != level:
                cached = (level, self._rules_of(flow, level, cookie_of[flow.job]))
            flow_rules[flow] = cached
        self.flow_rules = flow_rules
        if fabric_changed:
            self._rule_inputs = {f: self._rule_inputs[f] for f in flow_rules}
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
        keep = self.settling.keep()
        if prefix is None and not fabric_changed and keep is None \
                and self._flow_desired is not None and self._tables_exact:
            # Only PS-flow rules can have changed (the fabric did not): diff just those
            # against what they were, not the whole table (what a progress report costs).
            mods = R.diff(self._flow_desired, flow_desired.values())
        else:
            desired = self._static_rules + list(flow_desired.values())
            mods = list(prefix or []) + R.diff(s.installed.rules, desired, keep=keep)
        self._flow_desired = flow_desired
        # rules kept while settling make the tables differ from desired: next time a
        # full diff, so that they go as soon as they are no longer kept
        self._tables_exact = keep is None
        s.installed.apply(mods)
        s.metrics.inc("sluice_flow_mods_total", sum(1 for m in mods if m.command != "clear"))
        s.sink.send(mods, on_done)
        return mods

    def moved(self, moved: set[tuple[str, str]],
              on_done: Callable[[], None] | None) -> list[R.FlowMod] | None:
        """Progress reports of ``moved`` (job, worker) pairs: re-rank incrementally and
        rebuild, diff and send only the rules of the flows whose level moved. None when
        there is no exact incremental state to build on (the fabric changed, a switch is
        settling, ...): the caller reconciles in full."""
        ranker = self._ranker
        if not self._incremental_ready():
            return None
        s, jobs = self.s, self.s.registry.jobs
        try:
            with s.report_lock:           # batch numbers are recorded under it
                if isinstance(ranker, FlowRanker):
                    reported = []
                    for job_id, worker in moved:
                        job = jobs.get(job_id)
                        if job is not None:
                            batch = job.batch_of(worker)
                            reported += [(f, batch) for f in job.flows() if f.worker == worker]
                    changed = ranker.update(reported)
                else:
                    by_job = ranker.update([self.job_load(jobs[j])
                                            for j in {j for j, _ in moved} if j in jobs])
                    changed = self._job_levels(by_job)
        except KeyError:       # a flow or job the ranker was not built with: start over
            self._ranker = None
            return None
        if not changed:
            return []
        return self._send_flows(changed, [], on_done)

    def job_added(self, job: Job, on_done: Callable[[], None] | None) -> list[R.FlowMod]:
        """A job was registered (it is in the registry): rank it into the incremental
        ranker and send its rules and those of the jobs it moved, not every switch's
        table again (a registration then costs O(its flows), and the progress reports
        waiting for the shared lock wait that long, not a full reconcile's time). A full
        reconcile when there is no exact state to build on."""
        ranker = self._ranker
        if self._incremental_ready():
            try:
                with self.s.report_lock:       # batch numbers are recorded under it
                    if isinstance(ranker, FlowRanker):
                        changed = ranker.add((f, job.batch_of(f.worker)) for f in job.flows())
                    else:
                        changed = self._job_levels(ranker.add(self.job_load(job)))
                return self._send_flows(changed, [], on_done)
            except KeyError:      # the ranker already had it: start over
                self._ranker = None
        return self.full(on_done=on_done)

    def job_removed(self, job: Job, on_done: Callable[[], None] | None) -> list[R.FlowMod]:
        """A job was removed (no longer in the registry): its rules deleted and the jobs
        it moved re-ranked, incrementally as :meth:`job_added`."""
        ranker = self._ranker
        if self._incremental_ready():
            try:
                if isinstance(ranker, FlowRanker):
                    changed = ranker.remove(job.flows())
                else:
                    changed = self._job_levels(ranker.remove(job.id))
                return self._send_flows(changed, job.flows(), on_done)
            except KeyError:      # the ranker never had it: start over
                self._ranker = None
        return self.full(on_done=on_done)

    def _job_levels(self, by_job: dict[str, int]) -> dict[FlowKey, int]:
        jobs = self.s.registry.jobs
        return {f: level for j, level in by_job.items() for f in jobs[j].flows()}

    def _incremental_ready(self) -> bool:
        """Whether the last full reconcile left exact state to build on (no fabric
        change since, no switch settling, the tables as desired)."""
        return self._ranker is not None and not self.fabric_dirty \
            and not self.settling.until and self._tables_exact \
            and self._flow_desired is not None

    def _send_flows(self, changed: dict[FlowKey, int], gone: list[FlowKey],
                    on_done: Callable[[], None] | None) -> list[R.FlowMod]:
        """Rebuild the rules of the ``changed`` flows (at their new level, new flows
        included), drop those of the ``gone`` ones, and diff, apply and send only the
        rule keys they touch: what a full reconcile would send, at O(flows touched)."""
        s, jobs, holders = self.s, self.s.registry.jobs, self._flows_of_key
        connected, keys = s.fabric.connected, set()
        for flow in gone:
            self.levels.pop(flow, None)
            self._rule_inputs.pop(flow, None)
            for r in self.flow_rules.pop(flow, (0, []))[1]:
                if r.dpid in connected and r.key in holders:
                    keys.add(r.key)
                    holders[r.key] = [f for f in holders[r.key] if f != flow]
        for flow, level in changed.items():
            new = flow not in self.flow_rules
            self.levels[flow] = level
            rules = self._rules_of(flow, level, jobs[flow.job].cookie)
            self.flow_rules[flow] = (level, rules)
            for r in rules:
                if r.dpid in connected:
                    keys.add(r.key)
                    if new:
                        holders.setdefault(r.key, []).append(flow)
        # flows sharing a rule key: the most urgent one's rule is the one wanted
        wanted = []
        for key in keys:
            if not holders.get(key):
                holders.pop(key, None)        # no flow wants it any more: deleted
                continue
            best = min(holders[key], key=lambda f: self.flow_rules[f][0])
            wanted += [r for r in self.flow_rules[best][1] if r.key == key]
        mods = R.diff({k: self._flow_desired[k] for k in keys if k in self._flow_desired},
                      wanted)
        for key in keys:
            self._flow_desired.pop(key, None)
        self._flow_desired.update((r.key, r) for r in wanted)
        s.installed.apply(mods)
        s.metrics.inc("sluice_flow_mods_total", len(mods))
        s.sink.send(mods, on_done)
        return mods

    def _rules_of(self, flow: FlowKey, level: int, cookie: int) -> list[R.Rule]:
        """``flow``'s rules at ``level``: its data direction and its ACKs coming back, and
        the same for the control flow that rides on it (Job.control_flow)."""
        inputs = self._rule_inputs[flow] = self._inputs_of(flow, cookie)
        enforce, out = self.s.config.enforce, []
        for f, hops, back_hops, src_port, dst_port in inputs[1]:
            out += R.job_flow_rules(f, level, hops, cookie, enforce, src_port)
            out += R.job_ack_rules(f, level, back_hops, cookie, enforce, dst_port)
        return out

    def _inputs_of(self, flow: FlowKey, cookie: int) -> tuple:
        """Everything ``flow``'s rules are made of besides its level: its cookie, and for
        it and its control flow the routes both ways and the hosts' ports (kept with the
        rules, so that a fabric change rebuilds only the flows it moved)."""
        s = self.s
        control = s.registry.jobs[flow.job].control_flow(flow)
        parts = []
        for f in (flow,) if control is None else (flow, control):
            src, dst = s.fabric.hosts.get(f.src_ip), s.fabric.hosts.get(f.dst_ip)
            parts.append((f, self.hops(f.src_ip, f.dst_ip), self.hops(f.dst_ip, f.src_ip),
                          src.port if src else None, dst.port if dst else None))
        return cookie, tuple(parts)

    def _forwarding(self, connected: set[int]) -> list[R.Rule]:
        """Forwarding rules of the connected switches, rebuilt only for a switch whose
        routes changed since the last fabric change (R.forwarding_rules' order)."""
        out = []
        for dpid in sorted(d for d in self._next_ports if d in connected):
            table = self._next_ports[dpid]
            cached = self._forwarding_of.get(dpid)
            if cached is None or cached[0] != table:
                cached = self._forwarding_of[dpid] = (table, R.forwarding_rules({dpid: table}))
            out += cached[1]
        return out

    def _pod_routes(self, rules: list[R.Rule]) -> list[R.Rule]:
        """A controller per pod (controller/pods.py): its hosts' routes deliver frames
        with the host's own MAC, and every other pod's prefix goes to its exits."""
        f = self.s.fabric
        self.prefix_ports = pods.prefix_next_ports(self.s.config.scope, f.dpid_of_name,
                                                   f.links)
        hosts = {ip: (loc.dpid, loc.mac) for ip, loc in f.hosts.items()}
        return pods.delivering(rules, hosts) + pods.prefix_rules(self.prefix_ports)

    def hops(self, src: str, dst: str) -> list[tuple[int, int]]:
        """[(dpid, out_port), ...] from host ``src`` to ``dst`` over the routes of the last
        full reconcile ([] when none joins them); cached until the fabric changes."""
        hops = self._paths.get((src, dst))
        if hops is None:
            hops = self.s.fabric.path(src, dst, self._next_ports)
            self._paths[(src, dst)] = hops
        return hops

    def job_load(self, job: Job) -> job_rank.JobLoad:
        share = self._share.get(job.id)
        if share is None:
            # Busiest link of the job: most of its flows on one (switch, out port).
            on_link: dict[tuple[int, int], int] = {}
            for f in job.flows():
                for hop in self.hops(f.src_ip, f.dst_ip):
                    on_link[hop] = on_link.get(hop, 0) + 1
            share = job_rank.bottleneck_share(max(on_link.values(), default=0),
                                              len(job.workers), len(job.servers))
            self._share[job.id] = share
        return job_rank.JobLoad(job.id, job.cookie & 0xFFFFFFFF, job.done_batches(),
                                job.total_batches, job.bytes_per_batch, share,
                                job.registered_s)

    def _compute_levels(self) -> dict[FlowKey, int]:
        """flow -> level under the active ranking rule."""
        s = self.s
        rule, n = rank_rules.rule(s.rank), s.config.levels
        # The ranker computes the full levels and keeps its state for the reports after
        # (its levels equal assign_levels / the job rule's levels).
        if rule.shape == rank_rules.FLOW:
            with s.report_lock:           # batch numbers are recorded under it
                self._ranker = FlowRanker(s.registry.flows_with_batches(), n)
            return dict(self._ranker.levels)
        with s.report_lock:
            loads = [self.job_load(j) for j in s.registry.jobs.values()]
        self._ranker = JobRanker(rule, loads, n, s.config.attained_base_bytes,
                                 s.config.attained_factor)
        by_job = self._ranker.levels
        return {f: by_job[j.id] for j in s.registry.jobs.values() for f in j.flows()}
