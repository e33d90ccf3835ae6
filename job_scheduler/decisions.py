"""What a scheduling slot decides, as data: the core types every loop shares.

A slot's answer is a :class:`SlotPlan`: the queued jobs to start (:class:`StartDecision`,
a placement each) and the running jobs to suspend (:class:`Suspend`), in the order the
policy and the mechanisms took them (a suspension frees the GPUs a later start uses).
The simulator carries a plan out at once, the scheduler service through its executor,
the end-to-end run by launching and suspending PS jobs (Blox's placement returns jobs to
terminate and jobs to launch the same way). Pure: no loop, no process, no store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sluice_common.jobspec import JobSpec
from sluice_common.placement import Placement


@dataclass(frozen=True)
class QueuedJob:
    id: int
    spec: JobSpec
    submitted_at: float


@dataclass(frozen=True)
class StartDecision:
    """A policy's answer for one queued job: start it now, on this placement."""
    job_id: int
    placement: Placement
    # Extra facts a policy wants recorded with the job (e.g. its C(n)).
    notes: dict = field(default_factory=dict, compare=False)

    @property
    def gpus(self) -> int:
        return self.placement.gpus

    @property
    def ps_hosts(self) -> tuple[str, ...]:
        return self.placement.ps_hosts

    @property
    def worker_hosts(self) -> tuple[str, ...]:
        return self.placement.worker_hosts

    def gpus_by_host(self) -> dict[str, int]:
        return self.placement.gpus_by_host()

    def placement_record(self) -> dict:
        """The placement as the store keeps it (JSON)."""
        return {"ps_hosts": list(self.ps_hosts), "worker_hosts": list(self.worker_hosts),
                "gpus_by_host": self.gpus_by_host(), **({"notes": self.notes} if self.notes else {})}


@dataclass(frozen=True)
class Suspend:
    """Stop running job ``job_id`` keeping its progress; it waits again. ``cost_s``: the
    suspend + resume seconds it pays, GPUs held without progress, when it starts again;
    ``why``: who asked (``policy``, ``time-slice``, ``migrate``, ``regrow``)."""
    job_id: int
    cost_s: float = 0.0
    why: str = "policy"


@dataclass
class SlotPlan:
    """One slot's decisions: ``steps`` in the order taken, each a StartDecision or a
    Suspend (``starts`` and ``suspends`` are the two kinds apart)."""
    steps: list = field(default_factory=list)

    @property
    def starts(self) -> list[StartDecision]:
        return [s for s in self.steps if isinstance(s, StartDecision)]

    @property
    def suspends(self) -> list[Suspend]:
        return [s for s in self.steps if isinstance(s, Suspend)]

    def __bool__(self) -> bool:
        return bool(self.steps)

    def lines(self, names) -> list[str]:
        """The plan as text, one step a line (``names``: job key -> name)."""
        out = []
        for s in self.steps:
            if isinstance(s, Suspend):
                out.append(f"suspend {names[s.job_id]} ({s.why}, cost {s.cost_s:g} s)")
            else:
                out.append(f"start {names[s.job_id]}: {s.gpus} GPU(s) on "
                           f"{','.join(s.worker_hosts)} (PS {','.join(s.ps_hosts)})")
        return out
