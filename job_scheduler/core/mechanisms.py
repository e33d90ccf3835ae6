"""Scheduling mechanisms by composition: migration, time-slicing and packing (as in
Gandiva and Liquid) as small objects a loop holds in a tuple and calls through one
declared protocol (:class:`Mechanism`, every hook a no-op), the way FAUCET's ``Valve``
loops over its managers. Any policy may be combined with any of them; a policy with
``shares_gpus = False`` (las, which time-shares by its own preemption) refuses
time-slicing and packing. What a suspension costs is the loop's cost model
(``job_scheduler.core.preemption``), not a mechanism.

- **Time-slicing** (Gandiva): when jobs wait, the running jobs that have had a whole
  quantum of progress since they (re)started (restore time not counted) are suspended,
  longest-running first, until the free GPUs cover what the waiting jobs need; they wait
  again and the policy picks each resumed job's GPU count again (an elastic policy may
  resume it on more or fewer GPUs).
- **Packing** (Gandiva, Liquid's fine-grained sharing): when jobs still wait after the
  policy's step and no GPU is free, a waiting job that may run on one GPU joins a
  one-GPU job running alone on its GPU when both fit in half its memory each (the cap a
  real run sets with ``torch.cuda.set_per_process_memory_fraction(0.5)``); the two then
  run slower by ``PACK_SLOWDOWN`` each.
- **Migration** (Gandiva's introspective migration): after a job ends, a running job
  whose placement spans racks moves to a one-rack best-fit placement of the free GPUs
  when ``left * C_there + cost < left * C_here`` (``left`` its fraction of work to do).

``PACK_SLOWDOWN`` is an **assumption**, not a measurement: this project has no GPU to
measure two co-located training jobs on, and the Gandiva paper gives no single per-job
figure. 1.6 means two packed jobs together do 2/1.6 = 1.25x the work of one job alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Sequence

from job_scheduler.core.placement import BestFitPlacement

PACK_SLOWDOWN = 1.6          # assumed (module docstring)
PACK_MEMORY_SHARE = 0.5      # each of two packed jobs may use half the GPU's memory
GPU_MEMORY_GIB = 80.0        # the profiled device (NVIDIA H100 80GB, job_scheduler/core/data)


@dataclass(frozen=True)
class MechanismOptions:
    """Which mechanisms a loop composes. ``costs``: ``None`` (each suspension costs what
    its asker says: the policy's own figure), ``"zero"`` or ``"measured"`` (the table).
    Validation raises ``ValueError`` naming the field; the CLIs name the flag."""
    migrate: bool = False
    time_slice: float | None = None      # quantum, seconds
    pack: bool = False
    pack_slowdown: float = PACK_SLOWDOWN
    costs: str | None = None

    def __post_init__(self):
        if self.time_slice is not None and not self.time_slice > 0:
            raise ValueError(f"time_slice: must be > 0 seconds, got {self.time_slice}")
        if not self.pack_slowdown >= 1:
            raise ValueError(f"pack_slowdown: must be >= 1, got {self.pack_slowdown}")
        if self.costs not in (None, "zero", "measured"):
            raise ValueError(f"costs: must be zero or measured, got {self.costs!r}")

    @property
    def shares(self) -> bool:
        return self.time_slice is not None or self.pack

    def check(self, policy: str) -> None:
        """Refuse a policy one of the mechanisms cannot work with (``Mechanism.check``)."""
        from job_scheduler.core.policies import make_policy

        for m in self.build():
            m.check(None, make_policy(policy))

    def build(self) -> tuple:
        """The mechanisms, in the order a slot calls them."""
        out: list = []
        if self.time_slice is not None:
            out.append(TimeSlicing(self.time_slice))
        if self.pack:
            out.append(Packing(self.pack_slowdown))
        if self.migrate:
            out.append(Migration())
        return tuple(out)


# ---- the rules (pure; the real run applies them too) ---------------------------------------

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


def fits_packed(gmem_a: float, gmem_b: float, gpu_gib: float = GPU_MEMORY_GIB) -> bool:
    """May two jobs share one GPU, each capped at ``PACK_MEMORY_SHARE`` of its memory?
    ``max(gmem_a, gmem_b) <= PACK_MEMORY_SHARE * gpu_gib``."""
    return max(gmem_a, gmem_b) <= PACK_MEMORY_SHARE * gpu_gib


def leave_pair(partner: dict, guests: set, j):
    """Job ``j`` ends or is suspended: -> its packed partner, which now holds the GPU
    alone (no longer a guest), or None when ``j`` was not packed (its GPUs go free)."""
    other = partner.pop(j, None)
    if other is not None:
        del partner[other]
        guests.discard(j)
        guests.discard(other)
    return other


@lru_cache(maxsize=4096)
def job_gmem_gib(params: int, batch_size: int) -> float:
    """Peak GPU memory of a training step (Liquid's resource estimator, measured runs)."""
    from job_scheduler.core.resource_estimator import default_estimator
    return default_estimator().predict(params, batch_size).gmem_gib


def racks_of(state, placement) -> int:
    """Racks a placement's hosts (PS and workers) are in."""
    return len({state.rack_of[state.index[h]]
                for h in (*placement.ps_hosts, *placement.worker_hosts)})


# ---- the protocol and the mechanisms -------------------------------------------------------

class Mechanism:
    """The hooks a loop calls on each mechanism (``sim``: the loop's context). No-ops."""
    shares = False           # does it share GPUs between jobs (time-slicing, packing)?

    def check(self, sim, policy) -> None:
        """At construction: refuse a policy the mechanism cannot work with (a sharing
        one: a policy that time-shares by its own preemption, ``shares_gpus = False``)."""
        if self.shares and not policy.shares_gpus:
            raise ValueError(f"policy: {policy.name} time-shares by its own preemption: "
                             "time-slicing and packing are for the other policies")

    def before_step(self, sim, policy) -> None:
        """Jobs wait, before the policy's step (time-slicing)."""

    def after_step(self, sim, policy) -> None:
        """After the policy's step (packing)."""

    def after_complete(self, sim) -> None:
        """A job ended and freed its GPUs (migration)."""

    def next_event(self, sim) -> float:
        """The mechanism's next decision time while jobs wait (a quantum's end)."""
        return math.inf

    def on_start(self, sim, j: int) -> None:
        pass

    def on_stop(self, sim, j: int) -> bool:
        """Job j ends or is suspended; True when another job keeps its GPUs."""
        return False

    def holds_gpus(self, j: int) -> bool:
        """Does job j, starting, take GPUs of its own? (a packed guest does not)"""
        return True

    def partner_of(self, j: int) -> int | None:
        """The job j shares its GPU with now, or None."""
        return None

    def slowdown(self, j: int) -> float:
        """Factor on job j's time per unit of work."""
        return 1.0


def stopped(mechanisms, sim, j: int) -> bool:
    """Tell every mechanism that job j ended or was suspended; True when a packed
    partner keeps its GPUs (else they go free)."""
    return any([m.on_stop(sim, j) for m in mechanisms])   # a list: every one hears of it


def shared_gpus(ctx, j: int):
    """The GPU indices a packed guest ``j`` shares: its partner's."""
    partner = next((p for m in ctx.mechanisms if (p := m.partner_of(j)) is not None), None)
    run = ctx.running.get(partner) if partner is not None else None
    return ctx.state.holds(run.placement.job) if run is not None else None


def alone(sim, j: int) -> bool:
    """Job j has its GPUs to itself (no mechanism packed it with another)."""
    return all(m.partner_of(j) is None for m in sim.mechanisms)


def need(sim, policy, j: int) -> int:
    """GPUs waiting job j needs to start: the policy's count (its own for fixed-count
    policies, one for elastic ones), at most the cluster."""
    return min(policy.needs(sim, j), sim.state.total_gpus)


class TimeSlicing(Mechanism):
    shares = True

    def __init__(self, quantum: float):
        self.quantum = float(quantum)
        self.segment_start: dict[int, float] = {}

    def before_step(self, sim, policy) -> None:
        demand = min(sum(need(sim, policy, j) for j in sim.waiting), sim.state.total_gpus)
        # (a real job's segment starts at its first batch: not yet, not a candidate)
        segs = [(j, r.n, self.segment_start[j]) for j, r in sim.running.items()
                if alone(sim, j) and j in self.segment_start]
        for j in slice_victims(segs, sim.state.total_free, demand, sim.now, self.quantum):
            sim.preempt(j, why="time-slice")
            policy.on_requeue(sim, j)

    def next_event(self, sim) -> float:
        return min((s + self.quantum for j, s in self.segment_start.items()
                    if j in sim.running and alone(sim, j)), default=math.inf)

    def on_start(self, sim, j: int) -> None:
        # the quantum counts from the end of the restore: a restore longer than the
        # quantum would otherwise be sliced again before any progress, for ever
        self.segment_start[j] = sim.running[j].t_last

    def on_stop(self, sim, j: int) -> bool:
        self.segment_start.pop(j, None)
        return False


class Packing(Mechanism):
    shares = True

    def __init__(self, slowdown: float = PACK_SLOWDOWN):
        self.pack_slowdown = float(slowdown)
        self.partner: dict[int, int] = {}  # packed jobs, both ways
        self.guests: set[int] = set()      # the packed job that holds no GPU of its own

    def _gmem(self, sim, j: int) -> float:
        job = sim.jobs[j]
        return job_gmem_gib(sim.estimator.params(job), job.batch_size)

    def after_step(self, sim, policy) -> None:
        if not sim.waiting or sim.state.total_free:
            return
        alone = [k for k, r in sim.running.items() if r.n == 1 and k not in self.partner]
        for j in list(sim.waiting):
            if not alone:
                return
            if need(sim, policy, j) != 1 or sim.jobs[j].max_gpus < 1:
                continue
            host = next((k for k in alone
                         if fits_packed(self._gmem(sim, j), self._gmem(sim, k))), None)
            if host is None:
                continue
            alone.remove(host)
            self.partner[j], self.partner[host] = host, j
            self.guests.add(j)
            sim.counts["packed"] += 1
            sim.decisions += 1
            policy.on_packed(sim, j)
            sim.start(j, replace(sim.running[host].placement, job=sim.jobs[j].name))
            sim.retime(host)

    def holds_gpus(self, j: int) -> bool:
        return j not in self.guests

    def partner_of(self, j: int) -> int | None:
        return self.partner.get(j)

    def on_stop(self, sim, j: int) -> bool:
        other = leave_pair(self.partner, self.guests, j)
        if other is not None:          # it keeps the GPU indices (if j held them)
            sim.state.transfer(sim.jobs[j].name, sim.jobs[other].name)
        if other is not None and other in sim.running:
            sim.retime(other)          # alone again: back to full speed
        return other is not None

    def slowdown(self, j: int) -> float:
        return self.pack_slowdown if j in self.partner else 1.0


class Migration(Mechanism):
    def after_complete(self, sim) -> None:
        """GPUs just freed: a rack may have room for a cross-rack job now."""
        for j, run in list(sim.running.items()):
            if racks_of(sim.state, run.placement) < 2 or sim.state.total_free < run.n:
                continue
            target = BestFitPlacement().place(sim.state, sim.jobs[j].name, run.n,
                                              len(run.placement.ps_hosts))
            if target is None or racks_of(sim.state, target) > 1:
                continue
            left, model = sim.remaining(j), sim.models[j]
            stay = left * model.C(run.n, run.bw, sim.exchange_path(run.placement))
            move = (left * model.C(run.n, sim.live_bandwidth(target), sim.exchange_path(target))
                    + sim.cost_of(j, run.n))
            if move < stay:
                sim.preempt(j, sim.cost_of(j, run.n), why="migrate")
                sim.start(j, target)


def summary(sim, result) -> dict:
    """What ``sluice simulate --preemption-cost/--time-slice/--pack --json`` adds per policy."""
    c = sim.counts
    return {"preemptions": sim.preemptions, "migrations": c["migrate"],
            "grows": sim.grows, "shrinks": sim.shrinks,
            "time_slices": c["time-slice"], "packed": c["packed"],
            "avg_jct": result.avg_jct, "preemption_cost_s": round(sim.charged_s, 3)}
