"""When a worker's next progress report matters (pure): the hint in each report's answer.

Today's clients report every batch (at most every 0.2 s); the ranking rules need far
less. Under ``attained`` a job changes level only when its attained bytes pass the next
threshold; under ``remaining`` its own progress changes its level only when it overtakes
the job whose place would give it another level (the one just ahead of it, or, from the
shared last level, the last job with a level of its own); other jobs' moves are reported
by those jobs. So the controller answers each report with a :class:`Hint`:

- ``batch``: report once your batch reaches this (None: your own progress cannot change
  your level). A job's threshold ``T`` in done batches is split over its workers: each
  gets an allowance of batches it may advance silently, and the allowances of all its
  workers add up to less than the gap ``T - done`` (:func:`allowance`), so the report
  that makes the job's done batches reach ``T`` is always sent, at the same batch where
  a client reporting every batch would have sent it
  (tests/unit/controller/test_report_hints_replay.py).
- ``within_s``: report at the latest this long after your last report, if your batch
  moved (the bounds are the controller's ``--report-staleness``, 1 s, and
  ``--report-heartbeat``, 120 s). Under ``progress`` every batch moves the order, so
  the staleness bound is the rule's only bound. Under ``remaining`` the jobs that
  others' thresholds are measured against (those with a level of their own, the next in
  line, and as many again behind them) keep within it; deeper jobs get a bound growing
  with the square of their distance (controller/hinting.py), every job under
  ``attained`` the heartbeat only.

A client that ignores the hint (one written without it in mind) keeps working: the
controller ranks on whatever it is told.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from sluice_common import job_rank


class Hint(NamedTuple):
    batch: int | None           # report once the worker's batch reaches this
    within_s: float | None      # ... and at the latest this long after the last report

    def to_json(self) -> dict:
        return {"batch": self.batch, "within_s": self.within_s}


def _first_true(lo: int, hi: int, pred: Callable[[int], bool]) -> int | None:
    """Smallest d in [lo, hi] with pred(d), pred monotone (False ... True); None if none."""
    if lo > hi or not pred(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def order_threshold(load: job_rank.JobLoad, ahead_key: tuple | None,
                    key: Callable[[job_rank.JobLoad], tuple]) -> int | None:
    """``ORDER`` rules (``remaining``): done batches at which the job's sort ``key`` drops
    below ``ahead_key`` (the job it would overtake), searched up to the job's total
    batches; None when it never does, or the job's size is unknown."""
    if ahead_key is None or load.total_batches is None or load.bytes_per_batch is None:
        return None

    def passed(done: int) -> bool:
        return key(load._replace(done_batches=done)) < ahead_key

    return _first_true(load.done_batches + 1, max(load.done_batches + 1, load.total_batches),
                       passed)


def own_threshold(load: job_rank.JobLoad, levels: int, base: float, factor: float,
                  level_of: Callable[[job_rank.JobLoad, int, float, float], int]
                  ) -> int | None:
    """``OWN`` rules (``attained``): done batches at which the job's ``level_of`` reaches
    its next level; None on the last level (it has no bound)."""
    def level(done: int) -> int:
        return level_of(load._replace(done_batches=done), levels, base, factor)

    now = level(load.done_batches)
    if now >= levels - 1:
        return None
    hi = load.done_batches + 1
    while level(hi) == now:           # thresholds grow geometrically: few doublings
        if hi >= 2 ** 62:
            return None
        hi *= 2
    return _first_true(load.done_batches + 1, hi, lambda d: level(d) > now)


def allowance(gap: int, workers: int, others: int) -> int:
    """Batches one worker may advance without reporting, when its job is ``gap`` done
    batches short of its threshold and its other workers may still advance ``others``
    silently in all: a fair share of the gap, never more than what keeps the sum of all
    allowances below the gap (so the crossing is always reported)."""
    fair = -(-gap // max(1, workers)) - 1
    return max(0, min(fair, gap - 1 - others))


def worker_hint(batch: int, threshold: int | None, done: int, workers: int, others: int,
                within_s: float | None) -> Hint:
    """The hint for a worker at ``batch`` whose job has ``done`` batches done and its next
    threshold at ``threshold`` (None: none)."""
    if threshold is None:
        return Hint(None, within_s)
    gap = threshold - done
    if gap <= 0:                      # at or past it already (the ranker has it): next batch
        return Hint(batch + 1, within_s)
    # a worker at batch 0 (not started) adds nothing until batch 1: one batch more
    return Hint(batch + 1 + allowance(gap, workers, others) + (batch == 0), within_s)
