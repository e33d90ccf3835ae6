"""Leave the process at once when a PS role's work is done.

After ps-lite's closing barrier (``ps::Finalize``) a scheduler, server or worker has
nothing left to do, but the normal interpreter exit still tears MXNet down (engine
threads, static objects, the ZeroMQ context). Measured on a loaded host with two cores
(docs/design.md, "The test machine") in the heavy-tail priority experiment (16 jobs, load
average ~10): 2-5 s per process from
the barrier to the exit, every job, with and without network priority, while the job
still held its GPUs and its completion time kept running; idle, 0.3 s. Nothing is lost
by skipping it: the barrier has passed, so every peer is done with this process, and
output is flushed here.

Only after the barrier, though: MXNet finalises ps-lite when the KVStore object is
freed, and :func:`drop_kvstore` says whether that happened (a suspend vote that still
holds the KVStore keeps it alive, and a worker that left then would strand its job's
server and scheduler in their barrier forever).
"""

from __future__ import annotations

import gc
import os
import sys
import weakref


def drop_kvstore(holder, attr: str = "kv") -> bool:
    """Drop ``holder.attr`` (an MXNet KVStore) and collect: True when the KVStore was
    freed, so ps-lite's closing barrier has run; False while something else holds it."""
    kvstore = weakref.ref(getattr(holder, attr))
    setattr(holder, attr, None)
    gc.collect()
    return kvstore() is None


def exit_now(code: int = 0) -> None:
    """Flush stdout and stderr, then ``os._exit(code)``: no atexit handlers, no
    destructors (call it only after the closing barrier)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
