"""The send shares of the jobs sending on one rack uplink, kept summed.

A message round's wait at a FIFO uplink reads two figures of the other senders there
(``sluice_common.exchange_waits.fifo_round_wait_s``): the share of time at least one of
them is sending, ``busy = 1 - prod(1 - rho_i)``, and their sum, ``sum(rho_i)``. The
simulator asks for them at every uplink of every job it re-times, and on a full cluster an
uplink carries tens of jobs, so summing them afresh each time costs the square of the jobs
there per event. :class:`SendShares` keeps both over every sender of the uplink and gives a
job's figures by taking the few senders it does not wait behind back out: the job itself,
and under strict priority the less urgent ones.

The busy share is kept as a sum of ``log(1 - rho)`` over the senders with ``rho < 1`` and a
count of those with ``rho = 1`` (a sender that never pauses keeps the uplink busy, and its
factor of zero cannot be divided back out). The sums are updated as one sender's share
changes and rebuilt from the shares every ``REBUILD_EVERY`` updates, so their rounding
error stays that of a few dozen additions. They agree with the direct sums to about 1e-15
relative, not to the last digit: the order of the additions differs.
"""

from __future__ import annotations

import math
from typing import Iterable

# updates between rebuilds: bounds the rounding the running sums gather
REBUILD_EVERY = 64


class SendShares:
    """The senders of one uplink (job -> its one-way send share ``rho`` in [0, 1]) and
    their sums. Shares outside [0, 1] are clamped, as the busy share reads them."""

    __slots__ = ("shares", "_total", "_log_idle", "_always", "_updates")

    def __init__(self, shares: Iterable[tuple[int, float]] = ()):
        self.shares: dict[int, float] = {j: _clamp(p) for j, p in shares}
        self._rebuild()

    def _rebuild(self) -> None:
        total, log_idle, always = 0.0, 0.0, 0
        for p in self.shares.values():
            total += p
            if p >= 1.0:
                always += 1
            else:
                log_idle += math.log1p(-p)
        self._total, self._log_idle, self._always, self._updates = total, log_idle, always, 0

    def __len__(self) -> int:
        return len(self.shares)

    def __contains__(self, j: int) -> bool:
        return j in self.shares

    def set(self, j: int, rho: float) -> None:
        """Job ``j`` sends ``rho`` of its time now (joining if it was not a sender)."""
        # every re-timing sets the job's share on each of its uplinks: ``_take`` and
        # ``_count_update`` written out, the same operations in the same order
        p = rho if 0.0 <= rho <= 1.0 else min(1.0, max(0.0, rho))
        shares = self.shares
        old = shares.get(j)
        if old == p:
            return
        total, log_idle, always = self._total, self._log_idle, self._always
        if old is not None:
            total -= old
            if old >= 1.0:
                always -= 1
            else:
                log_idle -= math.log1p(-old)
        shares[j] = p
        total += p
        if p >= 1.0:
            always += 1
        else:
            log_idle += math.log1p(-p)
        self._total, self._log_idle, self._always = total, log_idle, always
        self._updates += 1
        if self._updates >= REBUILD_EVERY:
            self._rebuild()

    def drop(self, j: int) -> None:
        """Job ``j`` no longer sends here."""
        old = self.shares.pop(j, None)
        if old is not None:
            self._take(old)
            self._count_update()

    def _take(self, p: float) -> None:
        self._total -= p
        if p >= 1.0:
            self._always -= 1
        else:
            self._log_idle -= math.log1p(-p)

    def _count_update(self) -> None:
        self._updates += 1
        if self._updates >= REBUILD_EVERY:
            self._rebuild()

    def without(self, excluded: Iterable[int]) -> tuple[float, float]:
        """``(busy, senders)`` of every sender but ``excluded`` (jobs that are not senders
        are ignored): ``1 - prod(1 - rho_i)`` and ``sum(rho_i)``."""
        total, log_idle, always, left = self._total, self._log_idle, self._always, len(self.shares)
        shares = self.shares
        for j in excluded:
            p = shares.get(j)
            if p is None:
                continue
            left -= 1
            total -= p
            if p >= 1.0:
                always -= 1
            else:
                log_idle -= math.log1p(-p)
        if left <= 0:
            return 0.0, 0.0
        # min(1.0, max(0.0, -expm1(log_idle))) and max(total, 0.0) as the comparisons
        # they make: asked at every uplink of every re-timing
        if always > 0:
            busy = 1.0
        else:
            busy = -math.expm1(log_idle)
            if not busy > 0.0:
                busy = 0.0
            elif not busy < 1.0:
                busy = 1.0
        return busy, (0.0 if total < 0.0 else total)


def direct_sums(shares: Iterable[float]) -> tuple[float, float]:
    """``(busy, senders)`` of ``shares`` summed afresh: what :meth:`SendShares.without`
    keeps, for a few senders where taking the rest out would cost more."""
    idle, total = 1.0, 0.0
    for rho in shares:
        p = rho if 0.0 <= rho <= 1.0 else min(1.0, max(0.0, rho))      # _clamp(rho)
        idle *= 1.0 - p
        total += p
    return 1.0 - idle, total


def _clamp(rho: float) -> float:
    return rho if 0.0 <= rho <= 1.0 else min(1.0, max(0.0, rho))
