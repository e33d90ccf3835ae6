"""``sluice run --time-slice QUANTUM`` and ``--pack``: Gandiva's GPU sharing for real PS
jobs, and the resumed job's GPU count picked again (grow/shrink at a resume point).

- **Time-slicing**: each slot in which jobs wait and the free GPUs do not cover what they
  need, the running jobs that have trained a whole quantum since their (re)launch's
  first batch are asked
  to suspend (the rule of ``job_scheduler.sharing.slice_victims``); once suspended they
  wait again at the back of the queue. The policy then starts the waiting jobs. A
  resumed job goes through the policy like any waiting job, so an elastic policy
  (``lyapunov``: argmin C(n) under the GPUs free now) may resume it on more or fewer
  workers than it had (``sluice train --resume`` on another worker count); the report
  lists the count before and after, and counts grows and shrinks.
- **Packing**: when jobs still wait after the policy's step and no GPU is free, a
  waiting job that may run on one GPU is launched on the host and GPU of a running
  one-GPU job when both fit in half the GPU's memory (Liquid's resource estimator).
  Its workers get ``--gpu-memory-fraction 0.5`` (torch on CUDA:
  ``torch.cuda.set_per_process_memory_fraction``); on the emulated path its compute
  waits ``pack_slowdown`` times longer (``job_scheduler.sharing.PACK_SLOWDOWN``, an
  assumed interference factor). Limits, stated: the job already running keeps its
  speed and has no memory cap (it was launched alone; its memory was checked to fit in
  half), and the packed job stays slowed for its whole run.
"""

from __future__ import annotations

import math

from ps_runtime import checkpoint
from job_scheduler.mechanisms import (PACK_MEMORY_SHARE, PACK_SLOWDOWN, fits_packed,
                                   job_gmem_gib, leave_pair, slice_victims)
from job_scheduler.decisions import QueuedJob, StartDecision
from sluice_common.placement import Placement
from end_to_end.preemptive_run import PreemptiveRun, preemptive_loop


def resized_last_batch(done: int, last: int, workers: int, n: int) -> int:
    """The last batch of a job resumed after batch ``done`` of ``last`` on ``n`` workers
    instead of ``workers``: the same samples left, spread over n workers. Pure."""
    return done + math.ceil((last - done) * workers / n)


class SharingRun(PreemptiveRun):
    def __init__(self, *args, time_slice: float | None = None, pack: bool = False,
                 pack_slowdown: float = PACK_SLOWDOWN, fixed_count: bool = False, **kw):
        super().__init__(*args, **kw)
        self.time_slice = time_slice
        self.pack = pack
        self.pack_slowdown = float(pack_slowdown)
        self.fixed_count = fixed_count      # the policy runs each job at its max_gpus
        self.partner: dict[str, str] = {}   # packed jobs, both ways
        self.guests: set[str] = set()       # the packed job that holds no GPU of its own
        self.packings: list[dict] = []
        self.last_gpus: dict[str, int] = {}
        self.grows = self.shrinks = 0

    def _need(self, q: QueuedJob) -> int:
        return min(q.spec.max_gpus if self.fixed_count else 1, self.state.total_gpus)

    # ---- the hooks of RealTimeRun -----------------------------------------------------
    def _decide(self, queued: list[QueuedJob]):
        if self.time_slice and not self.suspending:
            self._slice(queued)
        started = super()._decide(queued)
        if self.pack:
            names = {r.qjob.spec.name for r in started}
            started += self._pack([q for q in queued if q.spec.name not in names])
        return started

    def _launch(self, q: QueuedJob, d: StartDecision, view):
        name = q.spec.name
        over = self.options.worker_overrides.setdefault(name, {})
        if name in self.guests:
            over.update(gpu_memory_fraction=PACK_MEMORY_SHARE, compute_slowdown=self.pack_slowdown)
        else:
            over.pop("gpu_memory_fraction", None)
            over.pop("compute_slowdown", None)
        prev = self.last_gpus.get(name)
        r = super()._launch(q, d, view)
        self.last_gpus[name] = d.gpus
        if prev is not None and d.gpus != prev:
            r.batches = self._batches(q.spec, d.gpus)   # not the checkpoint's count
        if prev is not None:                # a resume: on the same count or not
            entry = next(p for p in reversed(self.preemptions) if p["job"] == name)
            entry["gpus"], entry["resume_gpus"] = prev, d.gpus
            self.grows += d.gpus > prev
            self.shrinks += d.gpus < prev
            if d.gpus != prev:
                self.say(f"{'grow' if d.gpus > prev else 'shrink'} {name}: resumed on "
                         f"{d.gpus} GPU(s), had {prev}")
        return r

    def _batches(self, spec, n: int) -> int:
        """A job resumed on another worker count keeps its remaining samples: the n
        workers continue after the checkpoint's batch k until ``k + ceil((B - k) * w / n)``
        (B the last batch and w the workers of the checkpoint)."""
        ckpt = self.checkpoint_of.get(spec.name)
        if ckpt is None:
            return super()._batches(spec, n)
        m = checkpoint.read_manifest(ckpt)
        if m.workers == n:
            return m.batches
        return resized_last_batch(m.batch, m.batches, m.workers, n)

    def _hold(self, name: str, placement) -> None:
        if name not in self.guests:         # a packed job shares its partner's GPU
            super()._hold(name, placement)

    def _unhold(self, name: str, placement) -> None:
        if leave_pair(self.partner, self.guests, name) is None:
            super()._unhold(name, placement)

    # ---- time-slicing -------------------------------------------------------------------
    def _slice(self, queued: list[QueuedJob]) -> None:
        demand = min(sum(self._need(q) for q in queued), self.state.total_gpus)
        # the quantum counts from the segment's first batch: the restore is not a turn
        segs = [(name, r.decision.gpus, since) for name, r in self.running.items()
                if name not in self.partner and (since := self._training_since(r)) is not None]
        for name in slice_victims(segs, self.state.total_free, demand, self.now(),
                                  self.time_slice):
            self._ask_suspend(name, "time-slice")

    # ---- packing ------------------------------------------------------------------------
    def _gmem(self, spec) -> float:
        return job_gmem_gib(self.estimator.params(spec), spec.batch_size)

    def _pack(self, rest: list[QueuedJob]):
        if self.state.total_free:
            return []
        alone = [n for n, r in self.running.items() if r.decision.gpus == 1
                 and n not in self.partner and n not in self.suspending]
        out = []
        for q in rest:
            if not alone or self._need(q) != 1:
                continue
            host = next((n for n in alone if fits_packed(
                self._gmem(q.spec), self._gmem(self.running[n].qjob.spec))), None)
            if host is None:
                continue
            alone.remove(host)
            name = q.spec.name
            hd = self.running[host].decision
            d = StartDecision(q.id, Placement(name, hd.ps_hosts, hd.worker_hosts),
                              notes={"packed_with": host})
            self.partner[name], self.partner[host] = host, name
            self.guests.add(name)
            self.packings.append({"t": round(self.now(), 3), "job": name, "with": host,
                                  "host": hd.worker_hosts[0]})
            self.say(f"pack {name} onto the GPU of {host} on {hd.worker_hosts[0]} "
                     f"(memory cap {PACK_MEMORY_SHARE:g} each)")
            out.append(self._launch(q, d, self.topology))
        return out

    def result(self) -> dict:
        out = super().result()
        out["packings"] = self.packings
        out["summary"].update(
            time_slices=sum(p["why"] == "time-slice" for p in self.preemptions),
            grows=self.grows, shrinks=self.shrinks, packed=len(self.packings))
        return out


# ---- the command line ---------------------------------------------------------------------

def run_loop(args):
    """-> (loop class or None, policy step or None, extra loop arguments) for ``args``:
    ``preemptive_loop``'s, upgraded to :class:`SharingRun` by --time-slice/--pack."""
    loop, step, extra = preemptive_loop(args)
    sharing = sharing_options(args)
    if not sharing:
        return loop, step, extra
    return SharingRun, step, {**extra, **sharing}


def sharing_options(args) -> dict:
    """SharingRun's options from --time-slice/--pack ({} when neither is given)."""
    from job_scheduler.policies import REGISTRY
    from sluice_common.errors import InputError

    quantum = getattr(args, "time_slice", None)
    pack = getattr(args, "pack", False)
    slowdown = getattr(args, "pack_slowdown", None)
    if slowdown is not None and not pack:
        raise InputError("argument --pack-slowdown", "needs --pack")
    if quantum is None and not pack:
        return {}
    if quantum is not None and not quantum > 0:
        raise InputError("argument --time-slice", f"must be > 0 seconds, got {quantum}")
    if slowdown is not None and not slowdown >= 1:
        raise InputError("argument --pack-slowdown", f"must be >= 1, got {slowdown}")
    if args.policy == "las":
        raise InputError("argument --policy", "las time-shares by its own preemption: "
                         "--time-slice and --pack are for the other policies")
    out = {"time_slice": quantum, "pack": pack,
           "fixed_count": REGISTRY[args.policy].fixed_count}
    if slowdown is not None:
        out["pack_slowdown"] = slowdown
    return out
