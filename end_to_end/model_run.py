"""The dry run of ``sluice run --dry-run`` and of ``sluice demo``'s predictions: the run's
own scheduling loop (``job_scheduler.core.loop``, as ``end_to_end.runloop`` drives it on
the wall clock) on a virtual clock, with the exchange model as its executor.

The executor times each launched job as the exchange model prices it
(``end_to_end.predict``): it holds its GPUs for its start-up (:func:`predict.startup_of`:
the runtime's launch, ``kv.init``'s exchange and, with priority on, the registration),
then trains one batch per :func:`predict.shared_batch_s` (the links it shares with the
jobs training with it, in the levels the controller's rule gives them) plus its server's
time (:func:`predict.server_s`), and its processes exit ``close_s`` after its last
batch, when the loop has its GPUs back. A suspended job stops at the end of the batch in
progress (or of its first, in its start-up) and keeps the share of its work done; it
holds its GPUs while its checkpoint is written and its processes exit, and a resumed one
pays its start-up again plus reading that checkpoint (``ps_runtime.calibration.
checkpoint_costs``, measured on the demo's suspensions; its record's ``load_s``). The policy sees this progress as the live run's
policy sees its workers' batches, so the dry run decides as the live run does wherever
the model times the jobs as the fabric does.

:func:`model_run` -> a :class:`ModelRun`: every job's runs (start, stop, placement,
batches) with the exchange facts of its first, and its predicted JCT (exit - arrival).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from job_scheduler.core.decisions import SlotPlan, StartDecision
from job_scheduler.core.estimator import batches_for
from job_scheduler.core.live_view import LiveView
from job_scheduler.core.loop import (Ended, Progress, SchedulingLoop, TraceAdmission,
                                     VirtualClock)
from ps_runtime.calibration import CheckpointCosts
from ps_runtime.emulated_state import state_bytes
from sluice_common.exchange import ExchangeConstants, default_constants
from sluice_common.models import BYTES_PER_PARAM
from sluice_common.jobspec import JobSpec
from end_to_end.predict import (exchange_facts, server_s, shared_batch_s, startup_of,
                                wire_bytes_of)

DT_S = 0.25            # the longest step between re-pricings (priority levels move with progress)
MAX_STALLED_SLOTS = 10_000   # slots a job may wait on an idle cluster before the run gives up


@dataclass
class _Segment:
    """One run of a launched job: its record as the model prices it, when it was
    launched and begins training, and the work share at which it stops (1: its end)."""
    rec: dict
    launched: float
    ready: float
    server_s: float
    target: float = 1.0
    stopping: bool = False
    stopped_at: float | None = None
    trained_at: float | None = None
    hold_s: float = 0.0          # a suspension: its last batch -> its processes' exit


@dataclass
class ModelRun:
    """What the dry run did: per job its record (its first run's placement, start and
    batches, its ``segments``, the exchange facts) and
    predicted JCT (s; a job that never ended has none)."""
    records: list[dict] = field(default_factory=list)
    jct: dict[str, float] = field(default_factory=dict)


class ModelExecutor:
    """The exchange model as the loop's executor (the module doc)."""

    def __init__(self, topology, estimator, jobs: Sequence[JobSpec], worker_options,
                 rule: str | None, startup_s: float, close_s: float = 0.0,
                 server_per_worker_s: float = 0.0, batches: int | None = None,
                 constants: ExchangeConstants | None = None, dt: float = DT_S,
                 pack_slowdown: float = 1.0, checkpoint: CheckpointCosts | None = None):
        self.topology, self.estimator, self.rule = topology, estimator, rule
        self.options = worker_options
        self.specs = {j.name: j for j in jobs}
        self.startup_s, self.close_s, self.per_worker = startup_s, close_s, server_per_worker_s
        self.batches = batches
        self.c = constants or default_constants()
        self.dt = dt
        self.pack_slowdown = pack_slowdown      # a packed guest's compute, as the run slows it
        self.checkpoint = checkpoint
        self.t = 0.0
        self.share: dict[int, float] = {}         # of each job's work, done
        self.runs: dict[int, _Segment] = {}       # launched, by job key
        self.records: dict[str, dict] = {}
        self.exit: dict[str, float] = {}
        self._cache: dict = {}
        self._stalled = 0

    # ---- the executor (job_scheduler.core.loop.Executor) ---------------------------
    def admit(self, j: int, spec: JobSpec) -> None:
        nbytes = wire_bytes_of(self.estimator, spec, self.options)
        self.records[spec.name] = {"name": spec.name, "arrival": spec.arrival, "segments": [],
                                   **exchange_facts(self.estimator, spec, self.options, nbytes)}
        self.share.setdefault(j, 0.0)

    def observe(self, view, now: float) -> None:
        """The idle fabric: the view's own topology; the jobs' work up to now."""
        self._advance(now)

    def launch(self, d: StartDecision, packed_with: int | None) -> None:
        name = d.placement.job
        spec, record = self.specs[name], self.records[name]
        seg = {"start": self.t, "stop": None, "ps_hosts": list(d.ps_hosts),
               "worker_hosts": list(d.worker_hosts),
               "batches": batches_for(spec, d.gpus, self.batches)}
        if record["segments"] and self.checkpoint is not None:     # a resume
            seg["load_s"] = self.checkpoint.load_s(self._state_bytes(spec))
        if packed_with is not None:       # the run slows a packed guest's compute (runloop)
            seg["batch_compute_s"] = exchange_facts(
                self.estimator, spec, replace(self.options, compute_slowdown=self.pack_slowdown),
                record["bytes_per_batch"])["batch_compute_s"]
        record["segments"].append(seg)
        rec = {**record, **seg, "segment": len(record["segments"]) - 1}
        self.runs[d.job_id] = _Segment(
            rec, self.t, self.t + startup_of(self.topology, rec, self.startup_s, self.rule, self.c),
            server_s(self.topology, rec, self.per_worker, self.c))

    def suspend(self, j: int, why: str) -> None:
        """It stops after the batch in progress (its first, in its start-up)."""
        run = self.runs[j]
        batches = run.rec["batches"]
        run.target = min(1.0, (math.floor(self.share[j] * batches + 1e-9) + 1) / batches)
        run.stopping = True
        run.hold_s = self.close_s + (0.0 if self.checkpoint is None else self.checkpoint.hold_s(
            self._state_bytes(self.specs[run.rec["name"]])))

    def _state_bytes(self, spec: JobSpec) -> float:
        return state_bytes(self.estimator.params(spec) * BYTES_PER_PARAM)

    def progress(self, j: int, now: float) -> Progress | None:
        self._advance(now)
        run = self.runs[j]
        if now < run.ready - 1e-9:
            return None
        return Progress(self.share[j], run.ready)

    def training(self, j: int) -> None:
        pass

    def poll(self, now: float) -> list[Ended]:
        self._advance(now)
        out = []
        for j, run in self.runs.items():
            if run.trained_at is not None and run.trained_at + self.close_s <= now + 1e-9:
                out.append(Ended(j))
            elif run.stopped_at is not None and run.stopped_at + run.hold_s <= now + 1e-9:
                out.append(Ended(j, suspended=True))
        return out

    def ended(self, e: Ended) -> None:
        run = self.runs.pop(e.job_id)
        name = run.rec["name"]
        if e.suspended:
            self.records[name]["segments"][run.rec["segment"]]["stop"] = run.stopped_at
        else:
            self.exit[name] = run.trained_at + self.close_s

    def turn(self, loop: SchedulingLoop, now: float, slotted: bool) -> None:
        """A policy that leaves jobs waiting on an idle cluster would keep the loop
        going for ever: past MAX_STALLED_SLOTS such slots, the dry run gives up."""
        if not slotted:
            return
        if loop.view.waiting and not (loop.launched or loop.deferred or loop.admission.pending):
            self._stalled += 1
            if self._stalled > MAX_STALLED_SLOTS:
                stuck = [loop.view.jobs[j].name for j in list(loop.view.waiting)[:3]]
                raise RuntimeError(f"policy {loop.policy.name} has left jobs {stuck} waiting "
                                   f"on an idle cluster for {self._stalled} slots")
        else:
            self._stalled = 0

    def next_event(self, now: float) -> float:
        self._advance(now)
        ahead = [r.ready for r in self.runs.values() if r.ready > now + 1e-9]
        ahead += [r.trained_at + self.close_s for r in self.runs.values()
                  if r.trained_at is not None]
        ahead += [max(now, r.stopped_at + r.hold_s) for r in self.runs.values()
                  if r.stopped_at is not None]
        training = self._training(now)
        if training:
            it = self._batch_s(training)
            ahead.append(now + self.dt)
            ahead += [now + self._to_target(j, it[j]) for j in training]
        return min(ahead, default=math.inf)

    # ---- the model -------------------------------------------------------------------
    def _training(self, t: float) -> list[int]:
        return [j for j, r in self.runs.items()
                if r.ready <= t + 1e-9 and r.trained_at is None and r.stopped_at is None]

    def _batch_s(self, training: list[int]) -> dict[int, float]:
        active = [self.runs[j].rec for j in training]
        done = {self.runs[j].rec["name"]: self.share[j] * self.runs[j].rec["batches"]
                for j in training}
        shared = shared_batch_s(self.topology, active, done, self.rule, self.c, self._cache)
        return {j: shared[self.runs[j].rec["name"]] + self.runs[j].server_s for j in training}

    def _to_target(self, j: int, it: float) -> float:
        run = self.runs[j]
        return max((run.target - self.share[j]) * run.rec["batches"] * it, 1e-9)

    def _advance(self, now: float) -> None:
        """Every training job's work from the executor's time to ``now``, re-priced at
        each start, stop and end and at least every ``dt``."""
        while self.t < now - 1e-12:
            training = self._training(self.t)
            readies = [r.ready - self.t for r in self.runs.values() if r.ready > self.t + 1e-9]
            if not training:
                self.t = min([now] + [self.t + d for d in readies])
                continue
            it = self._batch_s(training)
            step = min([now - self.t, self.dt] + readies
                       + [self._to_target(j, it[j]) for j in training])
            for j in training:
                self.share[j] += step / (it[j] * self.runs[j].rec["batches"])
            self.t += step
            for j in training:
                run = self.runs[j]
                if self.share[j] >= 1 - 1e-9:
                    self.share[j], run.trained_at = 1.0, self.t
                elif run.stopping and self.share[j] >= run.target - 1e-9:
                    run.stopped_at = self.t

    def result(self) -> ModelRun:
        out = ModelRun()
        for name, rec in self.records.items():
            segs = rec["segments"]
            if not segs:
                continue
            first = segs[0]
            out.records.append({"name": name, "arrival": rec["arrival"], "start": first["start"],
                                "ps_hosts": first["ps_hosts"],
                                "worker_hosts": first["worker_hosts"],
                                "batches": first["batches"], "segments": segs,
                                **{k: rec[k] for k in ("bytes_per_batch", "keys",
                                                       "pipeline_keys", "batch_compute_s")}})
            if name in self.exit:
                out.jct[name] = round(self.exit[name] - rec["arrival"], 3)
        return out


def model_run(jobs: Sequence[JobSpec], topology, config, estimator,
              on_plan: Callable[[float, SlotPlan], None] | None = None) -> ModelRun:
    """The dry run of ``config`` (an ``end_to_end.run.RunConfig``) over ``jobs``: the
    run's policy, mechanisms, estimator (``end_to_end.run.run_estimator``) and slot, the loop on a virtual clock with the
    exchange model as executor (priority by ``config.rank`` when ``config.priority`` is
    on; the runtime's launch, close and server time as measured on the demo's runs,
    ``ps_runtime.calibration``). ``on_plan(t, plan)``: each plan as it is carried out."""
    from job_scheduler.core.mechanisms import Packing
    from job_scheduler.core.preemption import load_costs
    from ps_runtime.calibration import checkpoint_costs, launch_and_close, server_per_worker_s
    from ps_runtime.launcher import WorkerOptions

    launch_s, close_s = launch_and_close(config.compute)
    mechanisms = config.mechanisms.build()
    policy = config.make_policy()
    for m in mechanisms:
        m.check(None, policy)
    view = LiveView(topology, estimator, config.slot, mechanisms,
                    load_costs(config.mechanisms.costs))
    options = WorkerOptions(compute=config.compute, bw_scale=topology.emulation_bw_scale)
    packing = [m for m in mechanisms if isinstance(m, Packing)]
    executor = ModelExecutor(topology, estimator, jobs, options,
                             config.rank if config.priority == "on" else None, launch_s,
                             close_s, server_per_worker_s(), config.batches,
                             pack_slowdown=packing[0].pack_slowdown if packing else 1.0,
                             checkpoint=checkpoint_costs())
    SchedulingLoop(TraceAdmission(jobs), policy, view, executor, VirtualClock(), mechanisms=mechanisms,
                   on_plan=on_plan).run()
    result = executor.result()
    order = {j.name: k for k, j in enumerate(sorted(jobs, key=lambda j: (j.arrival, j.name)))}
    result.records.sort(key=lambda r: order[r["name"]])
    return result
