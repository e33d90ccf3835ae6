"""``sluice run --policy las`` and ``--migrate``: real PS jobs preempted and moved at batch
boundaries through suspend/resume (:mod:`ps_runtime.checkpoint`).

- **2D-LAS** (Tiresias, discretised): a job's priority is its queue, set by the
  GPU-seconds it has attained (thresholds in GPU-seconds), then its arrival. Each slot
  every job, running or waiting, is walked in priority order against the cluster's GPUs
  (:func:`las_plan`); a running job that no longer fits is asked to suspend (it finishes
  the batch in progress, checkpoints and exits), its GPUs go to the waiting jobs above it
  once freed, and it waits again with its progress kept. GPU counts are fixed (the job's
  ``max_gpus``), as in Tiresias; placement is first fit.
- **Migration** (Gandiva's introspective migration; any policy): when a running job's
  placement spans racks and a one-rack best-fit placement is free, the job is moved
  (suspend here, resume there) when the estimator's remaining time there plus the
  measured migration cost (``job_scheduler.preemption``) beats the remaining time in
  place. The target GPUs are held for it while it suspends. The controller forgets the
  old flows when the job suspends and learns the new endpoints when it resumes.

Each suspension is listed in the report (job, when, batch, why, suspend and resume
seconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from job_scheduler.placement import BestFitPlacement, ClusterState, FirstFitPlacement
from job_scheduler.decisions import QueuedJob, StartDecision
from ps_runtime import checkpoint
from end_to_end.runloop import RealTimeRun

# Attained-service thresholds (GPU-seconds) between LAS queues. Tiresias uses an hour;
# a demo run lasts minutes, so the default here is scaled to real runs of that length.
DEFAULT_RUN_THRESHOLDS = (20.0,)


@dataclass(frozen=True)
class LasJob:
    name: str
    gpus: int
    attained: float      # GPU-seconds
    arrival: float
    running: bool


def las_level(attained: float, thresholds: Sequence[float]) -> int:
    return sum(attained >= t for t in thresholds)


def las_plan(jobs: Sequence[LasJob], total_gpus: int,
             thresholds: Sequence[float]) -> tuple[list[str], list[str]]:
    """-> (running jobs to preempt, waiting jobs to start), walking every job in 2D-LAS
    order (queue by attained service, then arrival) against ``total_gpus``. Pure."""
    order = sorted(jobs, key=lambda j: (las_level(j.attained, thresholds), j.arrival, j.name))
    budget = total_gpus
    preempt, start = [], []
    for j in order:
        if j.gpus <= budget:
            budget -= j.gpus
            if not j.running:
                start.append(j.name)
        elif j.running:
            preempt.append(j.name)
    return preempt, start


class LasStep:
    """The policy step of a real LAS run: starts the planned waiting jobs that fit the
    free GPUs now (first fit); the run asks :meth:`plan` which running jobs to suspend."""

    def __init__(self, thresholds: Sequence[float] = DEFAULT_RUN_THRESHOLDS):
        self.thresholds = tuple(sorted(thresholds))
        self.placer = FirstFitPlacement()
        self.to_start: set[str] = set()

    def plan(self, jobs: Sequence[LasJob], total_gpus: int) -> list[str]:
        preempt, start = las_plan(jobs, total_gpus, self.thresholds)
        self.to_start = set(start)
        return preempt

    def __call__(self, queued: Sequence[QueuedJob], state: ClusterState,
                 now: float) -> list[StartDecision]:
        out = []
        state = state.copy()
        for q in sorted(queued, key=lambda q: q.submitted_at):
            if q.spec.name not in self.to_start:
                continue
            p = self.placer.place(state, q.spec.name, q.spec.max_gpus, q.spec.num_ps)
            if p is None:
                continue
            state.allocate(p)
            out.append(StartDecision(q.id, p, notes={"policy": "las"}))
        return out


@dataclass
class _Suspension:
    why: str                         # "las" | "migrate"
    asked_at: float
    batch: int = 0
    target: StartDecision | None = None     # migration: where it resumes (GPUs held)


class PreemptiveRun(RealTimeRun):
    """The real-time run with suspend/resume: LAS preemption (``las=LasStep``) and/or
    migration (``migrate_costs``: a ``job_scheduler.preemption.PreemptionCosts``)."""

    def __init__(self, *args, las: LasStep | None = None, migrate_costs=None, **kw):
        super().__init__(*args, **kw)
        self.las = las
        self.migrate_costs = migrate_costs
        self.suspending: dict[str, _Suspension] = {}
        self.checkpoint_of: dict[str, Path] = {}
        self.attained: dict[str, float] = {}          # GPU-s of finished segments
        self.past: dict[str, dict] = {}               # name -> first start, iterations so far
        self.preemptions: list[dict] = []
        self.resume_asked: dict[str, float] = {}      # name -> when its resume was launched
        self.running: dict = {}

    # ---- the hooks of RealTimeRun -----------------------------------------------------
    def _decide(self, queued: list[QueuedJob]):
        if self.las is not None:
            self._las_preempt(queued)
        return super()._decide(queued)

    def _after_watch(self) -> None:
        if self.migrate_costs is not None:
            self._consider_migrations()

    def _launch(self, q: QueuedJob, d: StartDecision, view):
        name = q.spec.name
        ckpt = self.out_dir / "jobs" / name / "checkpoint"
        resume = self.checkpoint_of.get(name)
        override = {"checkpoint_dir": str(ckpt)}
        if resume is not None:
            override["resume_from"] = str(resume)
        self.options.worker_overrides.setdefault(name, {}).update(override)
        r = super()._launch(q, d, view)
        if resume is not None:
            m = checkpoint.read_manifest(resume)
            r.batches = m.batches
            self.resume_asked[name] = r.started
            self.say(f"resume {name} after batch {m.batch} from {resume}")
        return r

    def _finish(self, r):
        name = r.qjob.spec.name
        sus = self.suspending.pop(name, None)
        batch = r.psjob.suspended_batch()
        if batch is None:
            if sus is not None:          # it finished before it could stop
                self._release_target(sus)
            self._merge_history(r)
            super()._finish(r)
            self._restore_history(name)
            return None
        return self._suspended(r, sus or _Suspension("unknown", self.now()), batch)

    # ---- LAS ----------------------------------------------------------------------------
    @staticmethod
    def _training_since(r) -> float | None:
        """When the segment's first batch was done: service is counted from there, so
        that start-up (and a resume's restore) is not attained service."""
        return min(r.first_batch.values()) if r.first_batch else None

    def _attained(self, name: str) -> float:
        r = self.running.get(name)
        since = self._training_since(r) if r is not None else None
        extra = r.decision.gpus * (self.now() - since) if since is not None else 0.0
        return self.attained.get(name, 0.0) + extra

    def _las_preempt(self, queued: list[QueuedJob]) -> None:
        jobs = [LasJob(q.spec.name, q.spec.max_gpus, self._attained(q.spec.name),
                       q.spec.arrival, False) for q in queued]
        # A job that is suspending is as good as waiting: its GPUs are about to be free.
        jobs += [LasJob(n, r.decision.gpus, self._attained(n), r.qjob.spec.arrival,
                        n not in self.suspending) for n, r in self.running.items()]
        for name in self.las.plan(jobs, self.state.total_gpus):
            self._ask_suspend(name, "las")

    def _ask_suspend(self, name: str, why: str, target: StartDecision | None = None) -> None:
        r = self.running[name]
        self.suspending[name] = _Suspension(why, self.now(), target=target)
        r.psjob.request_suspend()
        self.say(f"suspend {name} ({why}): asked to stop after the batch in progress")

    def _suspended(self, r, sus: _Suspension, batch: int) -> QueuedJob:
        name = r.qjob.spec.name
        now = self.now()                 # every process has exited (polled every 0.1 s)
        self._watch_tail(r)
        r.psjob.stop()
        self._forget(r)                  # GPUs back, the controller drops its flows
        since = self._training_since(r)
        if since is not None:
            self.attained[name] = self.attained.get(name, 0.0) + r.decision.gpus * (now - since)
        past = self.past.setdefault(name, {"first_start": r.started, "iterations": [],
                                           "first_batch_s": None})
        past["iterations"] += r.iterations
        ckpt = Path(r.psjob.options.checkpoint_dir)
        # The resumed job writes its own next checkpoint and logs: keep these apart.
        segment = len([p for p in self.preemptions if p["job"] == name]) + 1
        kept = ckpt.with_name(f"checkpoint-{segment}")
        ckpt.rename(kept)
        for proc in r.psjob.processes:
            if proc.log_path.exists():
                proc.log_path.rename(proc.log_path.with_name(f"{proc.log_path.stem}.segment{segment}.log"))
        self.checkpoint_of[name] = kept
        entry = {"job": name, "why": sus.why, "t": round(sus.asked_at, 3), "batch": batch,
                 "batches": r.batches, "suspend_s": round(now - sus.asked_at, 3),
                 "from_hosts": sorted(set(r.decision.worker_hosts) | set(r.decision.ps_hosts)),
                 # what the controller held for the old placement before it dropped it
                 "controller_before": self.records[name].pop("controller", None)}
        self.preemptions.append(entry)
        self.records[name].update(status="suspended")
        self.say(f"suspended {name} after batch {batch}/{r.batches} in {entry['suspend_s']:.2f} s "
                 f"({sus.why}); {self.state.total_free} GPUs free")
        q = r.qjob
        if sus.target is not None:       # migration: resume at once on the held GPUs
            self.state.release(sus.target.placement)
            self.running[name] = self._launch(q, sus.target, self.topology)
            entry["to_hosts"] = sorted(set(sus.target.worker_hosts) | set(sus.target.ps_hosts))
            return None
        return q

    def _release_target(self, sus: _Suspension) -> None:
        if sus.target is not None:
            self.state.release(sus.target.placement)

    # ---- migration ------------------------------------------------------------------------
    def _racks(self, hosts) -> int:
        return len({self.topology.host_by_name[h].rack for h in hosts})

    def _consider_migrations(self) -> None:
        from job_scheduler.estimator import effective_bandwidth

        for name, r in list(self.running.items()):
            d = r.decision
            if name in self.suspending or self._racks({*d.ps_hosts, *d.worker_hosts}) < 2:
                continue
            if len(r.first_batch) < len(r.followers):
                continue            # still starting: its remaining time is not known yet
            if self.state.total_free < d.gpus:
                continue
            p = BestFitPlacement().place(self.state, name, d.gpus, len(d.ps_hosts))
            if p is None or self._racks({*p.ps_hosts, *p.worker_hosts}) > 1:
                continue
            done = self._slowest_batch(r)
            left = max(r.batches - done, 0) / max(r.batches, 1)
            spec = r.qjob.spec
            stay = left * self.estimator.run_time(spec, d.gpus, effective_bandwidth(
                self.topology, d.ps_hosts, d.worker_hosts))
            there = left * self.estimator.run_time(spec, d.gpus, effective_bandwidth(
                self.topology, p.ps_hosts, p.worker_hosts))
            cost = self.migrate_costs.total(spec.model, d.gpus)
            if there + cost >= stay:
                continue
            target = StartDecision(r.qjob.id, p,
                                   notes={"migrated_from": sorted(set(d.worker_hosts))})
            self.state.allocate(target.placement)       # held while it suspends
            self.say(f"migrate {name}: {left:.0%} left, predicted {stay:.1f} s in place vs "
                     f"{there:.1f} s + {cost:.1f} s cost on {','.join(sorted(set(p.worker_hosts)))}")
            self._ask_suspend(name, "migrate", target)

    @staticmethod
    def _slowest_batch(r) -> int:
        last: dict[int, int] = {}
        for _, rank, batch, _ in r.iterations:
            last[rank] = max(last.get(rank, 0), batch)
        return min(last.values()) if len(last) == len(r.followers) else 0

    # ---- history across segments ------------------------------------------------------
    def _merge_history(self, r) -> None:
        past = self.past.get(r.qjob.spec.name)
        if past:
            r.iterations[:0] = past["iterations"]

    def _restore_history(self, name: str) -> None:
        """A resumed job's record: its first start (not the resume), its whole run, the
        resume-to-first-batch time of each resume."""
        past = self.past.get(name)
        rec = self.records[name]
        mine = [p for p in self.preemptions if p["job"] == name]
        if past:
            rec.update(start=round(past["first_start"], 3),
                       wait=round(past["first_start"] - rec["arrival"], 3),
                       run_s=round(rec["finish"] - past["first_start"], 3))
        rec["preemptions"] = len(mine)

    def note_resume(self, name: str, r) -> None:
        """When a resumed job's workers have all finished their first batch."""
        asked = self.resume_asked.pop(name, None)
        if asked is None:
            return
        entry = next(p for p in reversed(self.preemptions) if p["job"] == name)
        entry["resume_s"] = round(max(r.first_batch.values()) - asked, 3)
        entry["interruption_s"] = round(entry["suspend_s"] + entry["resume_s"], 3)
        self.say(f"resumed {name}: first batch {entry['resume_s']:.2f} s after launch; "
                 f"interruption {entry['interruption_s']:.2f} s")

    def _watch(self, r) -> bool:
        ended = super()._watch(r)
        name = r.qjob.spec.name
        if name in self.resume_asked and len(r.first_batch) == len(r.followers):
            self.note_resume(name, r)
        return ended

    def result(self) -> dict:
        out = super().result()
        out["preemptions"] = self.preemptions
        out["summary"]["preemptions"] = sum(p["why"] == "las" for p in self.preemptions)
        out["summary"]["migrations"] = sum(p["why"] == "migrate" for p in self.preemptions)
        return out


# ---- the command line ---------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--migrate", action="store_true",
                        help="move a running cross-rack job to one rack (suspend here, resume "
                             "there) when its predicted remaining time plus the measured "
                             "migration cost beats staying")
    parser.add_argument("--las-threshold", type=float, default=DEFAULT_RUN_THRESHOLDS[0],
                        metavar="GPU_S", help="--policy las: attained GPU-seconds that demote a "
                        f"job to the second queue (default {DEFAULT_RUN_THRESHOLDS[0]:g})")
    from job_scheduler.cli import add_sharing_arguments

    add_sharing_arguments(parser, "end_to_end/sharing_run.py; not with las")


def preemptive_loop(args):
    """-> (loop class or None, policy step or None, extra loop arguments) for ``args``."""
    las = args.policy == "las"
    migrate = getattr(args, "migrate", False)
    if not (las or migrate):
        return None, None, {}
    threshold = getattr(args, "las_threshold", DEFAULT_RUN_THRESHOLDS[0])
    if not threshold > 0:
        from sluice_common.errors import InputError

        raise InputError("argument --las-threshold", f"must be > 0, got {threshold}")
    extra = {}
    step = None
    if las:
        step = extra["las"] = LasStep((threshold,))
    if migrate:
        from job_scheduler.preemption import PreemptionCosts

        extra["migrate_costs"] = PreemptionCosts.load()
    return PreemptiveRun, step, extra

