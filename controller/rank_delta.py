"""Incremental re-ranking (pure): after some progress reports, which flows' levels moved.

The full rules (:func:`controller.ranking.assign_levels`, :func:`sluice_common.job_rank.
remaining_levels`, :func:`~sluice_common.job_rank.attained_levels`) look at every flow of
every job, O(flows) per report: with 100 jobs of 8 workers that alone capped the
controller at a few hundred reports/s. A report moves one worker's batch (one job's
done batches), so these rankers keep the sorted state between reports and return only
the levels that changed; the controller then rebuilds and sends only those flows' rules.

Each ranker is built from the full state (``levels`` then equals the full rule's map,
same tie-breaks) and updated with the changed entries; ``update`` returns
``{key: new level}`` for exactly the keys whose level differs from before, and
``levels`` always equals what the full rule gives for the current state
(tests/unit/ranking/test_rank_delta.py checks this with hypothesis).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Iterable

from sluice_common import job_rank, rank_rules
from sluice_common.rank_rules import RankRule
from controller.ranking import _KIND_ORDER, FlowKey


def _spread(i: int, n: int, levels: int) -> int:
    """Level of the i-th of n distinct urgencies (as :func:`assign_levels`)."""
    return i if n <= levels else (i * levels) // n


class FlowRanker:
    """The ``progress`` rule, kept up to date: flows grouped by urgency (batch, kind)."""

    def __init__(self, flows: Iterable[tuple[FlowKey, int]], levels: int) -> None:
        if levels < 1:
            raise ValueError("levels must be >= 1")
        self.n_levels = levels
        self._urgency: dict[FlowKey, tuple[int, int]] = {}
        self._groups: dict[tuple[int, int], set[FlowKey]] = {}
        for f, b in flows:
            u = (b, _KIND_ORDER[f.kind])
            self._urgency[f] = u
            self._groups.setdefault(u, set()).add(f)
        self._keys = sorted(self._groups)
        self._level_of_key = self._key_levels()
        self.levels: dict[FlowKey, int] = {f: self._level_of_key[u]
                                           for f, u in self._urgency.items()}

    def _key_levels(self) -> dict[tuple[int, int], int]:
        n = len(self._keys)
        return {u: _spread(i, n, self.n_levels) for i, u in enumerate(self._keys)}

    def update(self, flows: Iterable[tuple[FlowKey, int]]) -> dict[FlowKey, int]:
        """(flow, its worker's batch now) for the flows whose worker reported ->
        {flow: level} for every flow whose level changed (also other workers' flows,
        when a new or vanished urgency shifts the spread over the levels)."""
        touched: list[FlowKey] = []
        keys_changed = False
        for f, b in flows:
            u = (b, _KIND_ORDER[f.kind])
            old = self._urgency[f]          # KeyError: not a flow of this ranker
            if old == u:
                continue
            group = self._groups[old]
            group.discard(f)
            if not group:
                del self._groups[old]
                del self._keys[bisect_left(self._keys, old)]
                keys_changed = True
            if u not in self._groups:
                self._groups[u] = set()
                insort(self._keys, u)
                keys_changed = True
            self._groups[u].add(f)
            self._urgency[f] = u
            touched.append(f)
        changed: dict[FlowKey, int] = {}
        if keys_changed:
            new_levels = self._key_levels()
            for u, level in new_levels.items():
                if self._level_of_key.get(u) != level:
                    for f in self._groups[u]:
                        if self.levels[f] != level:
                            changed[f] = level
            self._level_of_key = new_levels
        for f in touched:
            level = self._level_of_key[self._urgency[f]]
            if self.levels[f] != level:
                changed[f] = level
        self.levels.update(changed)
        return changed


    # ---- jobs coming and going (a registration or removal, not a full rebuild) --------
    def add(self, flows: Iterable[tuple[FlowKey, int]]) -> dict[FlowKey, int]:
        """New flows (a job registered) with their batches -> {flow: level} for the new
        flows and every flow whose level moved because the urgencies' spread changed."""
        added = []
        for f, b in flows:
            if f in self._urgency:
                raise KeyError(f)           # already ranked: the caller starts over
            u = (b, _KIND_ORDER[f.kind])
            self._urgency[f] = u
            if u not in self._groups:
                self._groups[u] = set()
                insort(self._keys, u)
            self._groups[u].add(f)
            added.append(f)
        changed = self._relevel_all()
        for f in added:
            changed[f] = self.levels[f] = self._level_of_key[self._urgency[f]]
        return changed

    def remove(self, flows: Iterable[FlowKey]) -> dict[FlowKey, int]:
        """Flows gone (a job removed) -> {flow: level} for the remaining flows whose
        level moved."""
        for f in flows:
            u = self._urgency.pop(f)        # KeyError: not a flow of this ranker
            del self.levels[f]
            group = self._groups[u]
            group.discard(f)
            if not group:
                del self._groups[u]
                del self._keys[bisect_left(self._keys, u)]
        return self._relevel_all()

    def _relevel_all(self) -> dict[FlowKey, int]:
        """The spread after urgencies came or went: the known flows whose level moved."""
        new_levels = self._key_levels()
        changed = {}
        for u, level in new_levels.items():
            if self._level_of_key.get(u) != level:
                for f in self._groups[u]:
                    if f in self.levels and self.levels[f] != level:
                        changed[f] = level
        self._level_of_key = new_levels
        self.levels.update(changed)
        return changed

class JobRanker:
    """A job rule (``ORDER`` or ``OWN`` shape, :mod:`sluice_common.rank_rules`), kept up
    to date per job."""

    def __init__(self, rule: RankRule, loads: Iterable[job_rank.JobLoad], levels: int,
                 base: float = job_rank.ATTAINED_BASE_BYTES,
                 factor: float = job_rank.ATTAINED_FACTOR) -> None:
        if rule.shape not in (rank_rules.ORDER, rank_rules.OWN):
            raise ValueError(f"not a job rule: {rule.name!r}")
        if levels < 1:
            raise ValueError("levels must be >= 1")
        self.rule, self.n_levels, self.base, self.factor = rule, levels, base, factor
        loads = list(loads)
        if rule.shape == rank_rules.ORDER:
            self._key = {j.job: rule.key(j) for j in loads}
            self._sorted = sorted(self._key.values())
        self.levels = rule.job_levels(loads, levels, base, factor)

    def _head(self) -> list[str]:
        """Jobs at the positions that have a level of their own (and the first of the
        shared last level): only these can differ from 'last level'."""
        return [key[-1] for key in self._sorted[:self.n_levels]]

    def ahead_key(self, job: str) -> tuple | None:
        """``ORDER`` (``remaining``): the sort key of the job that ``job`` must overtake for its own
        progress to change its level (the one just ahead); from deeper in the shared last
        level, the first job of that level (the next in line: overtaking it changes no
        level, but once a job with a level of its own leaves, that is the key to pass).
        None when nothing can (first place)."""
        target = min(self.position(job), self.n_levels)
        return self._sorted[target - 1] if target >= 1 else None

    def position(self, job: str) -> int:
        """``ORDER``: the job's place in the order (0: first); KeyError if unknown."""
        return bisect_left(self._sorted, self._key[job])

    def update(self, loads: Iterable[job_rank.JobLoad]) -> dict[str, int]:
        """The jobs that reported, as they are now -> {job: level} for every job whose
        level changed (under an ``ORDER`` rule a job can move others by overtaking them)."""
        loads = list(loads)
        if self.rule.shape == rank_rules.OWN:
            changed = {}
            for j in loads:
                level = self.rule.level_of(j, self.n_levels, self.base, self.factor)
                if self.levels[j.job] != level:
                    changed[j.job] = level
            self.levels.update(changed)
            return changed
        before = self._head()
        for j in loads:
            old, new = self._key[j.job], self.rule.key(j)
            if old == new:
                continue
            del self._sorted[bisect_left(self._sorted, old)]
            insort(self._sorted, new)
            self._key[j.job] = new
        last = self.n_levels - 1
        # Outside the head every job is on the last level, before and after.
        position = {job: min(i, last) for i, job in enumerate(self._head())}
        changed = {}
        for job in {*before, *position, *(j.job for j in loads)}:
            level = position.get(job, last)
            if self.levels[job] != level:
                changed[job] = level
        self.levels.update(changed)
        return changed

    # ---- jobs coming and going (a registration or removal, not a full rebuild) --------
    def add(self, load: job_rank.JobLoad) -> dict[str, int]:
        """A job registered -> {job: level} for it and every job it moved."""
        if load.job in self.levels:
            raise KeyError(load.job)        # already ranked: the caller starts over
        if self.rule.shape == rank_rules.OWN:
            level = self.rule.level_of(load, self.n_levels, self.base, self.factor)
            self.levels[load.job] = level
            return {load.job: level}
        before = self._head()
        key = self.rule.key(load)
        insort(self._sorted, key)
        self._key[load.job] = key
        changed = self._relevel(before)
        changed[load.job] = self.levels[load.job] = min(self.position(load.job),
                                                        self.n_levels - 1)
        return changed

    def remove(self, job: str) -> dict[str, int]:
        """A job removed -> {job: level} for every remaining job whose level moved."""
        del self.levels[job]                # KeyError: not a job of this ranker
        if self.rule.shape == rank_rules.OWN:
            return {}
        before = [j for j in self._head() if j != job]
        del self._sorted[bisect_left(self._sorted, self._key.pop(job))]
        return self._relevel(before)

    def _relevel(self, before: list[str]) -> dict[str, int]:
        """``ORDER`` rules: after the order changed, the ranked jobs (of those that were or
        are now in the head) whose level moved."""
        last = self.n_levels - 1
        position = {job: min(i, last) for i, job in enumerate(self._head())}
        changed = {}
        for job in {*before, *position}:
            level = position.get(job, last)
            if job in self.levels and self.levels[job] != level:
                changed[job] = level
        self.levels.update(changed)
        return changed
