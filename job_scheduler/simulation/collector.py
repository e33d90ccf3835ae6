"""Python's cyclic garbage collector held back while a simulation runs.

A run of the simulator allocates a container object (a heap entry, a tuple of
figures) at nearly every step, and the collector's youngest generation is traversed
every ``700`` of them by default: on a full cluster that is about a tenth of the run's CPU,
and none of it frees anything, since what a run drops is freed by reference counting
(a whole run at load 0.9 leaves a few dozen objects in cycles). :func:`rare_collections`
raises the youngest generation's threshold for the length of a run, so the collector
still runs (memory stays bounded whatever a policy allocates) but seldom, and puts the
thresholds back as they were afterwards, also when the run raises.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

# container allocations between two collections of the youngest generation during a run
RUN_THRESHOLD = 100_000


@contextmanager
def rare_collections(threshold: int = RUN_THRESHOLD) -> Iterator[None]:
    """The youngest generation collected every ``threshold`` allocations in the block
    (never more often than it was; a threshold of 0, collection off, stays off), the
    previous thresholds restored on leaving it."""
    before = gc.get_threshold()
    if before[0]:
        gc.set_threshold(max(threshold, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
