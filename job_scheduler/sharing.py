"""GPU sharing in the simulator (issue 18, Gandiva and Liquid): time-slicing and packing,
as placement options any policy with the two sharing hooks can use.

- **Time-slicing** (Gandiva): when jobs wait for GPUs, the running jobs that have had a
  whole quantum of progress since they (re)started (restore time not counted) are suspended, longest-running first, until the
  free GPUs cover what the waiting jobs need; they go to the back of the queue and the
  policy starts jobs again (and picks each resumed job's GPU count again: an elastic
  policy may resume it on more or fewer GPUs). Each switch is charged the measured
  suspend + resume cost (:mod:`job_scheduler.preemption`).
- **Packing** (Gandiva, Liquid's fine-grained sharing): when jobs still wait after the
  policy's step, a waiting job that may run on one GPU joins a one-GPU job already
  running alone on its GPU, when both fit in half the GPU's memory each (the cap a
  real run sets with ``torch.cuda.set_per_process_memory_fraction(0.5)``). The two
  then run slower by ``PACK_SLOWDOWN`` each.

``PACK_SLOWDOWN`` is an **assumption**, not a measurement: this project has no GPU to
measure two co-located training jobs on, and the Gandiva paper gives no single
per-job figure (it reports that packing pays for jobs that leave a GPU underused).
1.6 means two packed jobs together do 2/1.6 = 1.25x the work of one job alone on the
GPU. ``sluice simulate --pack-slowdown`` changes it.

The policies tell the engine how they treat a job the engine moves (``on_requeue``: it
waits again; ``on_packed``: it started packed); a policy without these hooks (``las``,
which time-shares by its own preemption) cannot use either option.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Sequence

from job_scheduler.preemption import CostedSimulator

PACK_SLOWDOWN = 1.6          # assumed (module docstring)
PACK_MEMORY_SHARE = 0.5      # each of two packed jobs may use half the GPU's memory
GPU_MEMORY_GIB = 80.0        # the profiled device (NVIDIA H100 80GB, job_scheduler/data)


# ---- the rules (pure) -------------------------------------------------------------------

def slice_victims(segments: Sequence[tuple[int, int, float]], free: int, demand: int,
                  now: float, quantum: float) -> list[int]:
    """Running jobs to suspend at a quantum boundary: ``segments`` = (job, GPUs, start
    of its current run). Only jobs that ran a whole quantum may yield, longest-running
    first (ties: job id), until ``free`` covers ``demand``."""
    out = []
    for j, n, since in sorted(segments, key=lambda s: (s[2], s[0])):
        if free >= demand:
            break
        if now - since >= quantum - 1e-9:
            out.append(j)
            free += n
    return out


def fits_packed(gmem_a: float, gmem_b: float, gpu_gib: float = GPU_MEMORY_GIB,
                share: float = PACK_MEMORY_SHARE) -> bool:
    """May two jobs share one GPU, each capped at ``share`` of its memory?"""
    return max(gmem_a, gmem_b) <= share * gpu_gib


def leave_pair(partner: dict, guests: set, j):
    """Job ``j`` ends or is suspended: -> its packed partner, which now holds the GPU
    alone (no longer a guest), or None when ``j`` was not packed (its GPUs go free)."""
    other = partner.pop(j, None)
    if other is not None:
        del partner[other]
        guests.discard(j)
        guests.discard(other)
    return other


def add_sharing_arguments(parser, where: str) -> None:
    """--time-slice, --pack and --pack-slowdown of ``sluice simulate`` and ``sluice run``."""
    parser.add_argument("--time-slice", type=float, default=None, metavar="QUANTUM_S",
                        help="Gandiva time-slicing: while jobs wait, running jobs that ran a "
                             "whole quantum are suspended and wait again, each switch at its "
                             "suspend + resume cost; the policy picks a resumed job's GPU "
                             f"count again ({where})")
    parser.add_argument("--pack", action="store_true",
                        help="packing: a waiting job that may run on one GPU shares the GPU "
                             "of a running one-GPU job when both fit in half its memory")
    parser.add_argument("--pack-slowdown", type=float, default=None, metavar="FACTOR",
                        help=f"--pack: per-job slowdown of two packed jobs (default "
                             f"{PACK_SLOWDOWN:g}, assumed: job_scheduler/sharing.py)")


@lru_cache(maxsize=4096)
def job_gmem_gib(params: int, batch_size: int) -> float:
    """Peak GPU memory of a training step (Liquid's resource estimator, measured runs)."""
    from job_scheduler.resource_estimator import default_estimator
    return default_estimator().predict(params, batch_size).gmem_gib


# ---- the engine -------------------------------------------------------------------------

class SharingSimulator(CostedSimulator):
    """The costed simulator with time-slicing (``time_slice`` = quantum seconds) and/or
    packing (``pack``), and counts of both."""

    def __init__(self, *args, time_slice: float | None = None, pack: bool = False,
                 pack_slowdown: float = PACK_SLOWDOWN, **kw):
        super().__init__(*args, **kw)
        if time_slice is not None and not time_slice > 0:
            raise ValueError(f"time-slice quantum must be > 0 seconds, got {time_slice}")
        if not pack_slowdown >= 1:
            raise ValueError(f"pack slowdown must be >= 1, got {pack_slowdown}")
        if (time_slice or pack) and not self.policy.shares_gpus:
            raise ValueError(f"policy {self.policy.name} cannot use time-slicing or packing "
                             "(it preempts by its own rule)")
        self.time_slice = time_slice
        self.pack = pack
        self.pack_slowdown = float(pack_slowdown)
        self.time_slices = 0               # suspensions for a quantum's end
        self.packed = 0                    # jobs started packed onto a busy GPU
        self.segment_start: dict[int, float] = {}
        self.partner: dict[int, int] = {}  # packed jobs, both ways
        self.guests: set[int] = set()      # the packed job that holds no GPU of its own

    # ---- time-slicing ---------------------------------------------------------------------
    def _need(self, j: int) -> int:
        """GPUs a waiting job needs to start: its count (fixed-count policies) or one."""
        return min(self.policy.needs(self, j), self.state.total_gpus)

    def before_step(self) -> None:
        if not self.time_slice:
            return
        demand = min(sum(self._need(j) for j in self.waiting), self.state.total_gpus)
        segs = [(j, r.n, self.segment_start[j]) for j, r in self.running.items()
                if j not in self.partner]
        for j in slice_victims(segs, self.state.total_free, demand, self.now, self.time_slice):
            self.preempt(j)
            self.preemptions -= 1          # counted as a time slice, not a preemption
            self.time_slices += 1
            self.policy.on_requeue(self, j)

    def next_engine_event(self) -> float:
        if not self.time_slice or not self.running:
            return math.inf
        return min((s + self.time_slice for j, s in self.segment_start.items()
                    if j in self.running and j not in self.partner), default=math.inf)

    def preempt(self, j: int, overhead_s: float = 0.0) -> None:
        super().preempt(j, overhead_s)
        self.segment_start.pop(j, None)

    def start(self, j: int, placement) -> None:
        super().start(j, placement)
        # the quantum counts from the end of the restore: a restore longer than the
        # quantum would otherwise be sliced again before any progress, for ever
        self.segment_start[j] = self.running[j].t_last

    # ---- packing --------------------------------------------------------------------------
    def _gmem(self, j: int) -> float:
        job = self.jobs[j]
        return job_gmem_gib(self.estimator.params(job), job.batch_size)

    def after_step(self) -> None:
        if not self.pack or not self.waiting or self.state.total_free:
            return
        alone = [k for k, r in self.running.items() if r.n == 1 and k not in self.partner]
        for j in list(self.waiting):
            if not alone:
                return
            if self._need(j) != 1 or self.jobs[j].max_gpus < 1:
                continue
            host = next((k for k in alone if fits_packed(self._gmem(j), self._gmem(k))), None)
            if host is None:
                continue
            alone.remove(host)
            self.partner[j], self.partner[host] = host, j
            self.guests.add(j)
            self.packed += 1
            self.decisions += 1
            self.policy.on_packed(self, j)
            self.start(j, replace(self.running[host].placement, job=self.jobs[j].name))
            self._retime(self.running[host], force=True)

    def _allocate(self, j: int, placement) -> None:
        if j not in self.guests:            # a guest shares its partner's GPU
            super()._allocate(j, placement)

    def _release(self, j: int, run) -> None:
        other = leave_pair(self.partner, self.guests, j)
        if other is None:
            super()._release(j, run)
        elif other in self.running:
            self._retime(self.running[other], force=True)

    def slowdown(self, j: int) -> float:
        return self.pack_slowdown if j in self.partner else 1.0


def summary(sim: SharingSimulator, result) -> dict:
    """What ``sluice simulate --preemption-cost/--time-slice/--pack --json`` adds per policy."""
    return {"preemptions": sim.preemptions, "migrations": sim.migrations,
            "grows": sim.grows, "shrinks": sim.shrinks,
            "time_slices": sim.time_slices, "packed": sim.packed,
            "avg_jct": result.avg_jct, "preemption_cost_s": round(sim.charged_s, 3)}
