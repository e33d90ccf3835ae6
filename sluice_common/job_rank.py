"""Job-level ranking rules (pure): which job's flows go first on a shared bottleneck. The
controller applies them to the fabric; the simulator (``sluice simulate --priority``) and
the exchange model rank jobs with the same functions, so a rule is written once.

Four rules (their registry, which every user reads: :mod:`sluice_common.rank_rules`),
selectable on the controller (``--rank``) and at run time (REST):

- ``progress`` (the seed's rule, flow-level, in :mod:`controller.ranking`): smaller batch
  number first, pull before push. It is least-attained-service across jobs *in batches*:
  it equalises progress, so it helps a lagging job but lets nobody finish early.
- ``remaining``: shortest remaining work first (SRPT, Schrage 1967: optimal for mean
  completion time on one bottleneck). A job's remaining work is the bytes it still has to
  move across its most loaded link: ``(total_batches - done) * bytes_per_batch * share``
  where ``share`` is the fraction of a job-batch's bytes that crosses that link (1 when
  every worker's flows cross it, see :func:`bottleneck_share`). The scheduler knows
  ``total_batches`` (``epochs * dataset_size / batch_size``) and ``bytes_per_batch`` (the
  parameter volume) and registers them with the job.
- ``aged`` (the default): ``remaining`` with a bound on starvation. Its key is the
  remaining bytes plus ``AGING_BYTES_PER_S`` per second of its registration time, so a
  job registered ``d`` seconds later goes ahead only while it is smaller by ``d`` times
  that rate: a mid-sized job waits only behind the smaller jobs that arrive within a
  window its size bounds, not behind every one (SRPT alone lets a stream of small
  arrivals hold back its start-up). It is the key of a job aged by the time since it
  registered (``remaining - rate * (now - registered)``) with the common ``rate * now``
  left out: the order changes only with registrations and progress, never as time
  passes, so nothing re-ranks on a timer.
- ``attained``: least bytes sent first, for jobs whose length is unknown: a multi-level
  feedback queue (PIAS, Aalo's D-CLAS) whose thresholds grow geometrically, so a job is
  demoted one level each time its attained bytes pass ``base * factor**k``.

The job rules give a job's push and pull flows one class (a batch needs both; splitting
them would let another job's push overtake this job's pull). Levels: the ``levels - 1``
smallest (or, under ``aged``, lowest-keyed) jobs take levels 0..levels-2 one each, every
other job shares the last level.
Ties keep registration order (a FIFO within equal keys: no job is overtaken by a later
one of the same size).
"""

from __future__ import annotations

import math
from typing import Hashable, Iterable, Mapping, NamedTuple

# attained: first demotion after this many bytes, then every ``factor`` times more.
ATTAINED_BASE_BYTES = 4 << 20
ATTAINED_FACTOR = 4.0
# A job that did not say its bytes per batch counts this much per batch (attained only).
UNKNOWN_BYTES_PER_BATCH = 1 << 20
# aged: a job registered one second after another counts this many bytes more (0.02 of
# the heavy-tail fabric's 12 Mbit/s uplink, 1.5 MB/s). Chosen with the exchange and
# fluid models on the heavy-tail mix (tuning seeds 1-5, loads 0.7 and 0.9, against the
# predicted fair queue and PIAS; bench/RESULTS.md, "A bound on starvation"): the largest
# value whose predicted mean JCT stayed within a point of plain SRPT's at both loads.
AGING_BYTES_PER_S = 30_000.0


class JobLoad(NamedTuple):
    """What the job rules look at, per job."""
    job: str
    order: int                     # registration order (tie-break: earlier first)
    done_batches: int              # batches finished, summed over the job's workers
    total_batches: int | None      # epochs * dataset_size / batch_size; None: unknown
    bytes_per_batch: int | None    # bytes one batch pushes (and pulls); None: unknown
    share: float = 1.0             # fraction of a batch's bytes on the job's bottleneck
    registered_s: float = 0.0      # when the job registered (s; one clock for all jobs)


def remaining_bytes(j: JobLoad) -> float:
    """Bytes the job still moves across its bottleneck; inf when its size is unknown."""
    if j.total_batches is None or j.bytes_per_batch is None:
        return math.inf
    return max(0, j.total_batches - j.done_batches) * j.bytes_per_batch * j.share


def aged_bytes(j: JobLoad, per_s: float = AGING_BYTES_PER_S) -> float:
    """The ``aged`` rule's key: remaining bytes plus ``per_s`` for every second between a
    common origin and the job's registration. A job registered ``d`` seconds after
    another goes ahead of it only while it is smaller by ``per_s * d``, so a job with
    ``R`` bytes left is never overtaken by a job registered more than ``R / per_s``
    seconds after it (:func:`overtaking_window_s`), however many arrive. Every job ages
    at the same rate, so the order needs no re-rank as time passes, and the key only
    falls as the job progresses."""
    if per_s < 0:
        raise ValueError(f"per_s must be >= 0, got {per_s}")
    return remaining_bytes(j) + per_s * j.registered_s


def overtaking_window_s(remaining: float, per_s: float = AGING_BYTES_PER_S) -> float:
    """Under ``aged``: the jobs that can ever go ahead of a job with ``remaining`` bytes
    left, of those registered after it, registered less than this many seconds after it
    (and each was smaller than it by ``per_s`` a second of that gap). Infinite for a job
    of unknown size (every later job of known size goes first, as under ``remaining``)."""
    if not per_s > 0:
        raise ValueError(f"per_s must be > 0, got {per_s}")
    return remaining / per_s


def attained_bytes(j: JobLoad) -> float:
    per_batch = j.bytes_per_batch if j.bytes_per_batch is not None else UNKNOWN_BYTES_PER_BATCH
    return j.done_batches * per_batch * j.share


def top_k_levels(keyed: list[tuple[tuple, Hashable]], levels: int) -> dict[Hashable, int]:
    """Sorted keys -> the first ``levels - 1`` jobs one level each, the rest the last
    (the jobs by name, or by any key a caller ranks them by)."""
    check_levels(levels)
    keyed.sort()
    last = levels - 1
    return {job: min(i, last) for i, (_, job) in enumerate(keyed)}


def remaining_levels(jobs: Iterable[JobLoad], levels: int) -> dict[str, int]:
    """Shortest remaining bytes first. Jobs of unknown size go after every known one."""
    check_levels(levels)
    keyed = [((remaining_bytes(j), j.order, j.job), j.job) for j in jobs]
    return top_k_levels(keyed, levels)


def attained_level(attained: float, levels: int, base: float = ATTAINED_BASE_BYTES,
                   factor: float = ATTAINED_FACTOR) -> int:
    """The MLFQ level of a job that moved ``attained`` bytes: 0 below ``base``, then one
    level lower each time it passes ``base * factor**k``; the last level has no bound."""
    check_levels(levels)
    if attained < base:
        return 0
    return min(levels - 1, 1 + int(math.floor(math.log(attained / base, factor) + 1e-9)))


def attained_levels(jobs: Iterable[JobLoad], levels: int, base: float = ATTAINED_BASE_BYTES,
                    factor: float = ATTAINED_FACTOR) -> dict[str, int]:
    """Least attained bytes first, quantised into geometric MLFQ levels (jobs in one level
    share it: within a level the switch shares fairly, as PIAS/Aalo do)."""
    check_levels(levels)
    if not base > 0 or not factor > 1:
        raise ValueError("attained thresholds need base > 0 and factor > 1")
    return {j.job: attained_level(attained_bytes(j), levels, base, factor) for j in jobs}


def attained_levels_at(jobs: Iterable[JobLoad], thresholds: tuple[float, ...]
                       ) -> dict[str, int]:
    """Least attained bytes first with explicit demotion ``thresholds`` (increasing): a
    job's level is the number of thresholds its attained bytes reached (PIAS's MLFQ with
    thresholds from the size distribution, mininet_fabric/pias_thresholds.py)."""
    if list(thresholds) != sorted(thresholds):
        raise ValueError(f"thresholds must be increasing, got {thresholds}")
    return {j.job: sum(1 for t in thresholds if attained_bytes(j) >= t) for j in jobs}


def progress_levels(batch_of: Mapping[str, float], levels: int) -> dict[str, int]:
    """The ``progress`` rule at job level, for the models: fewer batches done first. It is
    :func:`controller.ranking.assign_levels` with every flow of a job at the job's batch
    (the models do not split a batch's push and pull): each distinct batch number takes a
    level, bucketed in proportion, order kept, when there are more than ``levels``."""
    check_levels(levels)
    keys = sorted(set(batch_of.values()))
    n = len(keys)
    level = {b: (i if n <= levels else (i * levels) // n) for i, b in enumerate(keys)}
    return {job: level[b] for job, b in batch_of.items()}


def bottleneck_share(flows_on_busiest_link: int, workers: int, servers: int) -> float:
    """Fraction of one job-batch's bytes crossing the job's busiest link. A batch of one
    worker pushes ``1/servers`` of the parameters to each server (and pulls as much back),
    so each (worker, server) flow carries ``bytes_per_batch / servers`` per batch of its
    worker; averaged over workers, the link carries ``flows / (workers * servers)`` of a
    job-batch's bytes (1 when every worker's flows cross it)."""
    if workers < 1 or servers < 1:
        raise ValueError("a job has at least one worker and one server")
    return flows_on_busiest_link / (workers * servers)


def check_levels(levels: int) -> None:
    if levels < 1:
        raise ValueError("levels must be >= 1")
