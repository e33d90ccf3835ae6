"""How long one emulated PS batch's push + pull takes alone on a link (pure).

ps-lite carries a worker's pushes and its pull requests on one connection
(worker -> server) and the server's acknowledgements and pull responses on the other
(server -> worker), each in order. A key's pull request leaves only once the server has
acknowledged that key's push (MXNet orders the pull after the push), so it queues behind
every push already handed to the connection. With all keys pushed at once the pulls start
when the pushes end: one direction busy at a time, 2 key-times a key. Holding back later
pushes until earlier pulls have arrived (``window`` keys in flight) lets pulls overlap
pushes. This event model gives the time per key in units of one key's transfer time;
measured on the fabric, a job alone with every key pushed at once moved push + pull
= the link rate, one direction at a time (bench/results/priority-rules.md, round 4).
"""

from __future__ import annotations

import heapq
import itertools
from functools import lru_cache


@lru_cache(maxsize=None)
def key_times(keys: int, window: int = 0) -> float:
    """Key-transfer times one batch of ``keys`` equal keys takes, push and pull, with at
    most ``window`` keys in flight (0: all at once). Control messages are taken as free."""
    if keys < 1 or window < 0:
        raise ValueError(f"keys must be >= 1 and window >= 0, got {keys}, {window}")
    events: list = []
    order = itertools.count()
    free_at = {"fwd": 0.0, "rev": 0.0}
    arrived: set[int] = set()
    issued = 0
    end = 0.0

    def send(link: str, now: float, size: float, kind: str, key: int) -> None:
        start = max(now, free_at[link])
        free_at[link] = start + size
        heapq.heappush(events, (free_at[link], next(order), link, kind, key))

    def issue(now: float) -> None:
        nonlocal issued
        while issued < keys and (window == 0 or issued < window or issued - window in arrived):
            send("fwd", now, 1.0, "push", issued)
            issued += 1

    issue(0.0)
    while events:
        now, _, link, kind, key = heapq.heappop(events)
        if kind == "push":                       # at the server: acknowledge it
            send("rev", now, 0.0, "ack", key)
        elif kind == "ack":                      # at the worker: the pull may go out
            send("fwd", now, 0.0, "request", key)
        elif kind == "request":                  # at the server: send the sum back
            send("rev", now, 1.0, "response", key)
        else:                                    # the key's sum has arrived
            arrived.add(key)
            end = now
            issue(now)
    return end
