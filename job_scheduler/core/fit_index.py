"""Jobs kept in priority order, split by GPU count, for greedy "next job that fits" scans.

A priority scheduler walks its jobs best first and takes each one that fits the GPUs
left (Tiresias' 2D-LAS does exactly this). Walking a plain sorted list costs O(queue)
per decision, and a decision comes at every event: on the Philly trace the queue holds
tens of thousands of jobs and the walk made the run quadratic. Jobs of one GPU count
either all fit or none does, so keeping one sorted list per count lets the walk skip a
count as a whole: a greedy pass costs O(taken x counts), independent of the queue.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from typing import Hashable, Iterator


class FitIndex:
    """``(key, j)`` entries, one sorted list per size; smaller key = higher priority."""

    def __init__(self):
        self._lists: dict[int, list[tuple]] = {}
        self._size: dict[Hashable, tuple[int, tuple]] = {}

    def __len__(self) -> int:
        return len(self._size)

    def __contains__(self, j) -> bool:
        return j in self._size

    def add(self, j, key, size: int) -> None:
        if j in self._size:
            self.remove(j)
        entry = (key, j)
        insort(self._lists.setdefault(size, []), entry)
        self._size[j] = (size, entry)

    def remove(self, j) -> None:
        size, entry = self._size.pop(j)
        lst = self._lists[size]
        del lst[bisect_left(lst, entry)]
        if not lst:
            del self._lists[size]

    def best(self):
        """(key, j) of the highest-priority entry, or None."""
        return min((lst[0] for lst in self._lists.values()), default=None)

    def worst(self):
        """(key, j) of the lowest-priority entry, or None."""
        return max((lst[-1] for lst in self._lists.values()), default=None)

    def walk(self) -> "Walk":
        """A best-first walk over the entries (see :class:`Walk`); the index must not
        change while it is in use."""
        return Walk(self._lists)

    def merged(self) -> Iterator[tuple[object, object, int]]:
        """Every entry as ``(key, j, size)``, best first, merged lazily (a walk that
        stops early pays only for what it read)."""
        def sized(size: int, lst: list[tuple]):
            for key, j in lst:
                yield key, j, size
        return heapq.merge(*[sized(s, lst) for s, lst in self._lists.items()])

    def ordered(self) -> list[tuple[object, object, int]]:
        """Every entry as ``(key, j, size)``, best first."""
        return sorted((key, j, s) for s, lst in self._lists.items() for key, j in lst)


class Walk:
    """Best-first cursor over a :class:`FitIndex`: ``peek(budget)`` shows the best entry
    not yet taken whose size fits, ``take(size)`` consumes it."""

    def __init__(self, lists: dict[int, list[tuple]]):
        self._lists = lists
        self._pos = dict.fromkeys(lists, 0)

    def peek(self, budget: int):
        """``(key, j, size)`` or None."""
        best = min(((lst[self._pos[s]], s) for s, lst in self._lists.items()
                    if s <= budget and self._pos[s] < len(lst)), default=None)
        if best is None:
            return None
        (key, j), s = best
        return key, j, s

    def take(self, size: int) -> None:
        self._pos[size] += 1
