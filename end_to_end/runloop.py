"""The real-time scheduling loop of ``sluice run``: jobs arrive at their ``arrival``
second, a policy step decides once per slot, each decision becomes a real PS job on the
Mininet hosts it names; with priority on, the controller learns its endpoints and progress.

Progress: each worker reports its own batches to the controller with the job's token
(ps_runtime/progress.py), as on a real cluster: the workers run inside Mininet host
namespaces and reach the controller's API over the fabric's management network
(mininet_fabric/management.py), not the data plane. The loop follows each worker's log
(``batch N ...`` when batch N is done) for its own picture only: the iterations, the
live status, the mechanisms' segment starts.

Closed loop: before each decision the loop reads the controller's measured link usage
(``end_to_end.closed_loop``) and hands the policy step a topology whose link bandwidths
are what is still available, so Comm(n) sees the load of the running jobs. Every
decision is recorded with the bandwidth estimate and the C(n) it implies.

Decisions: the scheduling loop of ``job_scheduler.core.loop`` on the wall clock, with
``RealTimeRun`` as its executor: each slot, on the grid (k x slot; a job joins the queue
at the first slot at or after its arrival), ``decisions.decide_slot`` on the run's
``LiveView`` with the policy (las and sluice suspend jobs too) and the mechanisms; the
loop places the plan and this executor carries it out: a ``Suspend`` stops the job at a
batch boundary with a checkpoint (end_to_end.suspend), a start launches once the loop
has its GPUs free (a suspension in flight may still hold them), a resume restores the
checkpoint, a packed start shares a running job's GPU.

The fabric, the controller client and the policy are passed in: ``sluice demo`` runs
two passes on one fabric, the experiment scripts pass a fixed-placement function.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from job_scheduler.core.decisions import QueuedJob, StartDecision
from job_scheduler.core.estimator import Estimator, batches_for, effective_bandwidth
from job_scheduler.core.loop import Ended, Progress, SchedulingLoop, TraceAdmission, WallClock
from job_scheduler.core.mechanisms import PACK_MEMORY_SHARE, Packing
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.core.policies import FunctionPolicy, Policy
from sluice_common.jobspec import JobSpec
from ps_runtime.launcher import JobFailed, PSJob, WorkerOptions, LineFollower, parse_batches
from ps_runtime.gpu_binding import ran_on_entry
from ps_runtime.worker_overrides import overrides_for
from ps_runtime.plan import BLOCK, placement_from_scheduler
from ps_runtime.runners import MininetRunner
from end_to_end import closed_loop, run_status
from end_to_end.run_status import RunningJob
from end_to_end.predict import exchange_facts, wire_bytes_of
from end_to_end.result import Iteration, JobRunRecord, RunResult, bw_text, run_result
from end_to_end.run_options import RunOptions
from end_to_end.sampling import NoSampling, RunSampler
from job_scheduler.core.live_view import LiveView
from end_to_end.suspend import Suspensions
from topologies import Topology

POLL_S = 0.1             # how often running jobs and logs are looked at
LINK_SAMPLE_S = 1.0      # how often the controller's link stats are read
USAGE_WINDOW = 3         # samples averaged for the closed loop (~3 s of bursty traffic)


@dataclass
class _Running:
    qjob: QueuedJob
    decision: StartDecision
    psjob: PSJob
    started: float
    token: str | None
    followers: dict[int, Any]
    batches: int
    iterations: list[Iteration] = field(default_factory=list)
    first_batch: dict[int, float] = field(default_factory=dict)   # worker -> t of batch 1 done


class RealTimeRun:
    def __init__(self, topology: Topology, jobs: Sequence[JobSpec], policy: Policy | Callable,
                 estimator: Estimator, fabric, client, out_dir: Path,
                 options: RunOptions = RunOptions(), *, policy_name: str = "?",
                 runner=None, mechanisms: Sequence = (), costs=None, can_suspend: bool = False,
                 sampler: RunSampler | None = None):
        self.topology = topology
        self.sampler = sampler or NoSampling()   # an experiment's measurements as the run goes
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.name))
        # a plain (queued, state, now) function: an experiment's fixed placement
        self.policy = policy if isinstance(policy, Policy) else FunctionPolicy(policy)
        self.policy_name = policy_name
        self.estimator = estimator
        self.fabric = fabric
        self.client = client
        self.out_dir = Path(out_dir)
        self.options = options
        self.runner = runner             # None: cold processes on the fabric's hosts
        self.mechanisms = tuple(mechanisms)
        for m in self.mechanisms:
            m.check(None, self.policy)
        self.view = LiveView(topology, estimator, options.slot_s, self.mechanisms, costs)
        self.state = ClusterState(topology)   # GPUs held by launched jobs (not packed guests)
        # the loop on the wall clock, this object its executor (the module doc)
        self.clock = WallClock()
        self.loop = SchedulingLoop(TraceAdmission(self.jobs), self.policy, self.view, self, self.clock,
                                   mechanisms=self.mechanisms, state=self.state)
        self.running: dict[int, _Running] = {}    # launched, by job key
        self.suspensions = Suspensions()
        # the report's suspension section: a preemptive policy or any mechanism
        self.can_suspend = can_suspend or bool(self.mechanisms)
        self.packings: list[dict] = []
        self._next_sample = 0.0
        self._last_waiting: tuple | None = None
        self.used: dict[tuple[str, str], float] = {}
        self._recent: deque = deque(maxlen=USAGE_WINDOW)
        self.used_at = -math.inf
        self.link_samples: list[dict] = []
        self.decisions: list[dict] = []
        self.records: dict[str, JobRunRecord] = {}
        self._next_port = options.port_base
        self.interrupted = False
        self.status = None      # a sluice_common.progress.LiveStatus, set by the caller
        self._status_at = -math.inf

    # ---- helpers -------------------------------------------------------------------
    def now(self) -> float:
        return self.clock.now()

    def say(self, text: str) -> None:
        line = f"[{self.now():7.1f}s] {text}"
        if self.status is not None and self.status.enabled:
            self.status.print(line)        # above the live status line
        else:
            # (stderr as it is now: a default bound at import would outlive a redirection)
            print(line, file=sys.stderr, flush=True)

    def show_status(self, pending, waiting, running) -> None:
        """The live line (jobs queued/running/done, elapsed, ETA from C(n))."""
        now = self.now()
        if self.status is not None and self.status.enabled and now - self._status_at >= 0.5:
            self._status_at = now
            c_n = {d["job"]: d["C_n_s"] for d in self.decisions}
            live = [RunningJob(r.started, c_n.get(name, 0.0), r.batches,
                               run_status.slowest_batch(r) or 0)
                    for name, r in running.items()]
            total_gpus = self.state.total_gpus
            waiting = [self.estimator.C(spec, min(spec.max_gpus, total_gpus))
                       for spec in list(waiting) + list(pending)]
            done = sum(1 for r in self.records.values() if r.status in ("finished", "failed"))
            eta = run_status.eta_s(now, live, waiting, max(len(running), 1))
            self.status.update(run_status.status_line(now, len(pending), len(waiting), live,
                                                      done, len(self.jobs), eta))

    def sample_links(self) -> None:
        try:
            ports = self.client.links()["ports"]
        except Exception as err:      # a slow controller must not stop the run
            self.say(f"link stats unavailable: {err}")
            return
        sample = closed_loop.measured_usage(self.topology, ports)
        self._recent.append(sample)
        self.used = closed_loop.average_usage(self._recent)
        self.used_at = self.now()
        util = closed_loop.utilisation(self.topology, sample)
        switches = {s.name for s in self.topology.switches}
        # Per direction, emulated Mbit/s sent out of each switch-to-switch port.
        tx = {f"{p['switch']}>{p['peer']}": round(float(p.get("tx_bytes_per_s") or 0) * 8 / 1e6, 3)
              for p in ports if p.get("peer") in switches}
        self.link_samples.append({"t": round(self.used_at, 2), "tx_mbps": tx,
                                  "util": {f"{a}-{b}": round(u, 4) for (a, b), u in util.items()}})

    # ---- the loop ------------------------------------------------------------------
    def run(self) -> dict:
        self.say(f"run: {len(self.jobs)} jobs, policy {self.policy_name}, priority "
                 f"{'on' if self.options.priority else 'off'}, slot {self.options.slot_s:g} s")
        try:
            self.loop.run()
        except KeyboardInterrupt:
            # Ctrl-C: stop every job (below), keep what was measured; the caller writes
            # the partial report and then takes the fabric and the controller down.
            self.interrupted = True
            self.say(f"interrupted: stopping {len(self.running)} running job(s)")
        finally:
            for r in self.running.values():           # Ctrl-C or a crash: stop them all
                r.psjob.stop()
                self._forget(r)
                self._update(r.qjob.spec.name, status="stopped", iterations=tuple(r.iterations))
        self.sample_links()
        return self.result()

    # ---- the executor (job_scheduler.core.loop.Executor) ---------------------------
    def admit(self, j: int, spec: JobSpec) -> None:
        self.records[spec.name] = JobRunRecord(spec.name, spec.model, spec.arrival, "queued")
        self.say(f"arrive {spec.name} ({spec.model}, max {spec.max_gpus} GPUs); "
                 f"{len(self.view.waiting)} queued")

    def observe(self, view, now: float) -> None:
        """The closed loop: C(n) on the measured available bandwidth ("measured" model)."""
        if now - self.used_at > LINK_SAMPLE_S / 2:
            self.sample_links()
        view.bandwidth_topology = closed_loop.available_topology(self.topology, self.used)

    def launch(self, d: StartDecision, packed_with: int | None) -> None:
        self.running[d.job_id] = self._launch(d, packed_with is not None)

    def suspend(self, j: int, why: str) -> None:
        r = self.running[j]
        self.suspensions.ask(r, why, self.now())
        self.say(f"suspend {r.qjob.spec.name} ({why}): asked to stop after the batch in progress")

    def progress(self, j: int, now: float) -> Progress | None:
        """A running job's work done (its slowest worker) and when its segment's
        training began (once every worker finished a batch)."""
        r = self.running[j]
        self._watch_tail(r)
        done = run_status.slowest_batch(r)
        if done is None:
            return None
        return Progress(done / max(r.batches, 1), min(r.first_batch.values()))

    def training(self, j: int) -> None:
        r = self.running[j]
        self.suspensions.first_batches(r.qjob.spec.name, r, self.say)

    def poll(self, now: float) -> list[Ended]:
        out = []
        for j, r in self.running.items():
            if self._watch(r):
                out.append(Ended(j, suspended=r.psjob.suspended_batch() is not None))
        return out

    def ended(self, e: Ended) -> None:
        self._ended(self.running.pop(e.job_id))

    def turn(self, loop: SchedulingLoop, now: float, slotted: bool) -> None:
        self.sampler.on_turn(self.now(), self.by_name())
        if now >= self._next_sample:
            self.sample_links()
            self._next_sample = now + LINK_SAMPLE_S
        if slotted:
            self._last_waiting = self._say_waiting(self._last_waiting)
        self.show_status(list(loop.admission.pending),
                         [self.view.jobs[j] for j in self.view.waiting], self.by_name())

    def next_event(self, now: float) -> float:
        return now + POLL_S

    def by_name(self) -> dict[str, _Running]:
        return {r.qjob.spec.name: r for r in self.running.values()}

    def _say_waiting(self, last: tuple | None) -> tuple:
        """One line per change of the queue after a slot."""
        view = self.view
        waiting = (tuple(view.jobs[j].name for j in view.waiting), self.state.total_free)
        if view.waiting and waiting != last:
            self.say(f"slot: {len(view.waiting)} waiting ({', '.join(waiting[0])}), "
                     f"{waiting[1]} GPUs free")
        return waiting

    def _launch(self, d: StartDecision, guest: bool = False) -> _Running:
        j, n = d.job_id, d.gpus
        spec = self.view.jobs[j]
        q = QueuedJob(j, spec, spec.arrival)
        bus, path = self.estimator.bus_mbps, self.view.exchange_path(d)   # the exchange model's
        bw_nominal = effective_bandwidth(self.topology, d.ps_hosts, d.worker_hosts, bus=bus)
        bw = effective_bandwidth(self.view.bandwidth_topology, d.ps_hosts, d.worker_hosts, bus=bus)
        c_n = self.estimator.C(spec, n, bw, path)
        notes = {}
        if guest:
            host = self.view.jobs[self.view.partner_of(j)].name
            notes["packed_with"] = host
            self.packings.append({"t": round(self.now(), 3), "job": spec.name, "with": host,
                                  "host": d.worker_hosts[0]})
            self.say(f"pack {spec.name} onto the GPU of {host} on {d.worker_hosts[0]} "
                     f"(memory cap {PACK_MEMORY_SHARE:g} each)")
        self.decisions.append({
            "t": round(self.now(), 2), "job": spec.name, "gpus": n,
            "ps_hosts": list(d.ps_hosts), "worker_hosts": list(d.worker_hosts),
            "gpu_ids": d.gpu_ids.as_dict(),
            "bw_nominal_mbps": _num(bw_nominal), "bw_estimate_mbps": _num(bw),
            "C_n_s": round(c_n, 3), "C_n_nominal_s": round(self.estimator.C(spec, n, bw_nominal, path), 3),
            "notes": notes})
        batches = (self.suspensions.last_batch(spec.name, n)
                   or batches_for(spec, n, self.options.batches))
        o = self.options
        overrides = overrides_for(o.worker_overrides, spec.name).set_fields()
        if self.can_suspend:            # where to checkpoint, what to resume from
            overrides["checkpoint_dir"] = str(self.out_dir / "jobs" / spec.name / "checkpoint")
            if spec.name in self.suspensions.checkpoint_of:
                overrides["resume_from"] = str(self.suspensions.checkpoint_of[spec.name])
        if guest:
            slowdown = next(m.pack_slowdown for m in self.mechanisms if isinstance(m, Packing))
            overrides.update(gpu_memory_fraction=PACK_MEMORY_SHARE, compute_slowdown=slowdown)
        # 10 classes; one torch thread per worker (2 cores shared by all)
        worker_options = WorkerOptions(**{"input_size": o.input_size, "num_classes": 10,
                                          "threads": 1, "seed": q.id,
                                          "compute": o.compute, "profile": o.profile,
                                          "bw_scale": self.topology.emulation_bw_scale,
                                          **overrides})
        psjob = PSJob(spec, placement_from_scheduler(self.topology, d.placement, d.gpu_ids),
                      self.runner or MininetRunner(self.fabric), self.out_dir / "jobs" / spec.name,
                      batches=batches, base_port=self._next_port, options=worker_options)
        self._next_port += BLOCK
        token, bytes_per_batch = None, wire_bytes_of(self.estimator, spec, worker_options)
        if o.priority:
            # The job's size, for the controller's job ranking rules: batches over all
            # workers and the bytes one batch pushes (and pulls) on this fabric.
            body = {**psjob.registration(), "total_batches": batches * n,
                    "bytes_per_batch": bytes_per_batch}
            token = self.client.register_job(body, wait=True)["token"]
            # its workers report their batches themselves (the module doc)
            psjob.controller_url, psjob.token = self.client.url, token
        psjob.start()
        r = _Running(q, d, psjob, self.now(), token,
                     {p.rank: LineFollower(p.log_path) for p in psjob.workers}, batches)
        hosts = set(d.ps_hosts) | set(d.worker_hosts)
        self._update(spec.name, status="running", start=round(r.started, 3), gpus=n,
                     ps_hosts=tuple(d.ps_hosts), worker_hosts=tuple(d.worker_hosts), batches=batches,
                     hosts=len(hosts), racks=len({self.topology.host_by_name[h].rack for h in hosts}),
                     C_n_s=round(c_n, 3), bw_estimate_mbps=_num(bw),
                     predicted_run_s=round(self.estimator.run_time(spec, n, bw, path), 3),
                     **exchange_facts(self.estimator, spec, worker_options, bytes_per_batch))
        self.say(f"start {spec.name}: {n} GPU(s) on {','.join(d.worker_hosts)} (PS "
                 f"{','.join(d.ps_hosts)}; GPUs {d.gpu_ids.as_dict()}), {batches} batches/worker, bw estimate "
                 f"{bw_text(bw, d.ps_hosts, d.worker_hosts)} (nominal "
                 f"{bw_text(bw_nominal, d.ps_hosts, d.worker_hosts)}), C(n) {c_n:.1f} s")
        self.suspensions.launched(spec.name, n, hosts, r.started, self.say)
        return r

    def _ended(self, r: _Running) -> None:
        """Job r's processes exited (the loop has its GPUs back): it finished (or
        failed), or it was suspended."""
        name = r.qjob.spec.name
        batch = r.psjob.suspended_batch()
        if batch is None:
            self.suspensions.finished(r)
            self._finish(r)
            self.records[name] = self.suspensions.history(name, self.records[name])
            return
        self._watch_tail(r)
        r.psjob.stop()
        self._forget(r)                  # the controller drops its flows
        entry = self.suspensions.stopped(r, batch, self.now(), self.records[name].controller)
        self._update(name, status="suspended", controller=None)
        self.say(f"suspended {name} after batch {batch}/{r.batches} in {entry['suspend_s']:.2f} s "
                 f"({entry['why']}); {self.state.total_free} GPUs free")

    def _watch(self, r: _Running) -> bool:
        """Read new batches; True when the job ended (finished or failed)."""
        self._watch_tail(r)
        try:
            if r.psjob.poll():
                return True
        except JobFailed as err:
            self._update(r.qjob.spec.name, error=str(err)[-2000:])
            return True
        if self.now() - r.started > self.options.job_timeout_s:
            r.psjob.stop()
            self._update(r.qjob.spec.name, error=f"timed out after {self.options.job_timeout_s:.0f} s")
            return True
        return False

    def _finish(self, r: _Running) -> None:
        extra = self.sampler.on_job_end(r.qjob.spec.name, r)   # its processes still exist
        self._watch_tail(r)
        r.psjob.stop()                     # every process has exited: closes the logs
        self._forget(r)
        spec = r.qjob.spec
        finish = self.now()
        ok = self.records[spec.name].error is None
        times = [it.time_s for it in r.iterations]
        # launch -> every worker has finished its first batch (start-up included)
        first = (round(max(r.first_batch.values()) - r.started, 3)
                 if len(r.first_batch) == len(r.followers) else None)
        # When each process was seen to exit (run time): where a job's end goes (the
        # ps-lite closing barrier, MXNet's teardown) when its last batch is long done.
        rec = self._update(spec.name, process_exit_s={p.name: round(p.exited_at - self.clock.t0, 3)
                                                      for p in r.psjob.processes if p.exited_at is not None},
                           first_batch_s=first, run_s=round(finish - r.started, 3),
                           status="finished" if ok else "failed", finish=round(finish, 3),
                           turnaround=round(finish - spec.arrival, 3),
                           wait=round(r.started - spec.arrival, 3),
                           mean_iteration_s=round(sum(times) / len(times), 4) if times else None,
                           iterations=tuple(r.iterations), **extra)
        self.say(f"{'finish' if ok else 'FAILED'} {spec.name}: turnaround {finish - spec.arrival:.1f} s, "
                 f"mean iteration {rec.mean_iteration_s} s; {self.state.total_free} GPUs free"
                 + ("" if ok else f"\n{rec.error}"))

    def _watch_tail(self, r: _Running) -> None:
        """Read the workers' new batch lines (the loop's own picture; the workers report
        their progress to the controller themselves)."""
        for rank, follower in r.followers.items():
            for rec in parse_batches(follower.new_lines()):
                r.iterations.append(Iteration(round(self.now(), 3), rank, rec.batch, rec.time_s))
                r.first_batch.setdefault(rank, self.now())

    def _forget(self, r: _Running) -> None:
        """The GPUs a job that ended ran on, for its record; the controller's rules of it
        dropped (the loop takes its GPUs back)."""
        name = r.qjob.spec.name
        self._update(name, gpu_runs=(*(self.records[name].gpu_runs or ()), ran_on_entry(
            r.started, self.now(), r.psjob.ran_on_dir, r.decision.gpu_ids)))
        if r.token:
            try:
                # What the controller made of the job, for the report (and as proof that
                # it saw the job): the push/pull flows it classified, the batch each
                # worker last reported to it (by worker rank).
                flows = self.client.flows(r.qjob.spec.name)["flows"]
                self._update(r.qjob.spec.name, controller={
                    "flows": len(flows),
                    "reported_batch": self._reported_batches(r.qjob.spec.name),
                    "levels": sorted({f["level"] for f in flows if f["level"] is not None})})
                self.client.remove_job(r.qjob.spec.name)
            except Exception as err:
                self.say(f"removing {r.qjob.spec.name} from the controller failed: {err}")

    def _reported_batches(self, name: str) -> dict[str, int]:
        """Worker rank -> the batch the controller holds for it (its own last report)."""
        job = next((j for j in self.client.jobs() if j.get("id") == name), {})
        return reported_by_rank(job.get("batches") or {})

    def _update(self, name: str, **changes) -> JobRunRecord:
        self.records[name] = rec = self.records[name].with_(**changes)
        return rec

    def result(self) -> RunResult:      # end_to_end.result
        return run_result(self)


def reported_by_rank(batches: dict[str, int]) -> dict[str, int]:
    """The controller's per-worker batches (``{"w0": 5, ...}``) keyed by worker rank
    (``{"0": 5, ...}``), in rank order."""
    out = {}
    for wid, batch in batches.items():
        if wid.startswith("w") and wid[1:].isdigit():
            out[int(wid[1:])] = int(batch)
    return {str(rank): out[rank] for rank in sorted(out)}


def _num(bw: float):
    return None if math.isinf(bw) else round(bw, 1)

