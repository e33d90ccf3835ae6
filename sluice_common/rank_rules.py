"""The one list of ranking rules (pure): name, one-line summary, and how the rule ranks.

Every user reads this registry: the controller (``--rank``, ``POST /rank``, its config,
its saved state, its incremental rankers and report hints, its metrics), the simulator
(``sluice simulate --priority``), the fluid model's modes, the exchange model's
predictions, the heavy-tail experiment's modes and every command line's choices. A new
rule is one :func:`register` call (here, or in its own module) with one of three shapes,
which is all the controller needs to rank by it between full reconciles:

- ``FLOW``: the seed's flow rule (``controller.ranking``): each flow by its worker's batch
  and its kind (pull before push). At job level (the models) it ranks by batch number.
- ``ORDER``: jobs sorted by ``key`` (smaller first, a key that never grows as the job
  progresses); the ``levels - 1`` first take a level each, the rest share the last.
- ``OWN``: each job's level is a function of its own load alone (``level_of``).

The rules themselves are in :mod:`sluice_common.job_rank`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from sluice_common import job_rank
from sluice_common.job_rank import ATTAINED_BASE_BYTES, ATTAINED_FACTOR, JobLoad
from sluice_common.registry import Registry

FLOW, ORDER, OWN = "flow", "order", "own"
SHAPES = (FLOW, ORDER, OWN)


@dataclass(frozen=True)
class RankRule:
    name: str
    summary: str                                     # one clause, for help texts
    shape: str                                       # FLOW | ORDER | OWN
    key: Callable[[JobLoad], tuple] | None = None    # ORDER: the sort key, smaller first
    # OWN: (load, levels, attained base bytes, attained factor) -> the job's level
    level_of: Callable[[JobLoad, int, float, float], int] | None = None

    def __post_init__(self):
        if not self.name or "+" in self.name or self.name == "off":
            raise ValueError(f"a rule's name is not empty, 'off' or with '+': {self.name!r}")
        if self.shape not in SHAPES:
            raise ValueError(f"shape must be one of {SHAPES}, got {self.shape!r}")
        if (self.shape == ORDER) != (self.key is not None) or \
                (self.shape == OWN) != (self.level_of is not None):
            raise ValueError(f"rule {self.name!r}: an ORDER rule has a key, an OWN rule a "
                             "level_of, and no other rule either")

    @property
    def by_batch(self) -> bool:
        """The models give this rule each job's batch number (whole batches per worker),
        not its done batches summed over its workers."""
        return self.shape == FLOW

    def job_levels(self, jobs: Iterable[JobLoad], levels: int,
                   base: float = ATTAINED_BASE_BYTES, factor: float = ATTAINED_FACTOR
                   ) -> dict[str, int]:
        """Each job's level, for the models that price the fabric's priority (the
        simulator, the predictions, the fluid model) and for the controller's job rules;
        FLOW ranks on ``done_batches`` read as the job's batch number."""
        jobs = list(jobs)
        if self.shape == FLOW:
            return job_rank.progress_levels({j.job: j.done_batches for j in jobs}, levels)
        if self.shape == ORDER:
            return job_rank.top_k_levels([(self.key(j), j.job) for j in jobs], levels)
        job_rank.check_levels(levels)
        if not base > 0 or not factor > 1:
            raise ValueError("attained thresholds need base > 0 and factor > 1")
        return {j.job: self.level_of(j, levels, base, factor) for j in jobs}


_REGISTRY: Registry[RankRule] = Registry("rule")
register, unregister, names, rule, help_text = (
    _REGISTRY.register, _REGISTRY.unregister, _REGISTRY.names, _REGISTRY.get,
    _REGISTRY.help_text)


def job_levels(name: str, jobs: Iterable[JobLoad], levels: int,
               base: float = ATTAINED_BASE_BYTES, factor: float = ATTAINED_FACTOR
               ) -> dict[str, int]:
    """Each job's level under the rule called ``name`` (see :meth:`RankRule.job_levels`)."""
    return rule(name).job_levels(jobs, levels, base, factor)


def _remaining_key(j: JobLoad) -> tuple:
    return (job_rank.remaining_bytes(j), j.order, j.job)


def _aged_key(j: JobLoad) -> tuple:
    return (job_rank.aged_bytes(j), j.order, j.job)


def _attained_level(j: JobLoad, levels: int, base: float, factor: float) -> int:
    return job_rank.attained_level(job_rank.attained_bytes(j), levels, base, factor)


register(RankRule("progress", "smaller batch number first, pull before push (flow level)",
                  FLOW))
register(RankRule("remaining", "shortest remaining bytes first (SRPT)", ORDER,
                  key=_remaining_key))
register(RankRule("aged", "shortest remaining bytes first, a job registered later counting "
                  f"{job_rank.AGING_BYTES_PER_S / 1e3:g} kB more per second (SRPT with "
                  "bounded starvation)", ORDER, key=_aged_key))
register(RankRule("attained", "least bytes sent first, geometric MLFQ levels", OWN,
                  level_of=_attained_level))
# The controller's rule unless told: SRPT's mean JCT with a bound on which later, smaller
# jobs can go ahead of a job (plain SRPT lets a mid-sized job's start-up wait behind
# every smaller arrival).
DEFAULT_RULE = "aged"
