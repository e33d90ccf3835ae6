"""Make a long-running service hand large freed buffers back to the system.

glibc serves an allocation above ``M_MMAP_THRESHOLD`` (128 KiB) with its own mmap and
unmaps it when freed, but after the first such free it raises the threshold (up to
32 MiB), so later request bodies of a few hundred KiB come from the heap and stay there;
and every thread of the HTTP server's pool gets its own arena (up to 8 per core), each
keeping its own high-water mark. Measured (bench/api/bench_api_burst.py): 100 refused
870 KB job files left ``sluice scheduler`` at 1.37-1.43x its resident memory; with a
fixed threshold and one arena, 1.03-1.08x (and a large file refused by a child
process, job_scheduler.service.submission_check). Fixing the threshold costs an mmap per large
buffer, nothing for small ones. A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3       # glibc's mallopt parameter numbers (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 128 * 1024
ARENA_MAX = 1               # the GIL serialises Python anyway


def return_large_buffers_to_the_system() -> bool:
    """Fix glibc's mmap threshold and cap its arenas; returns whether it applied."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(M_ARENA_MAX, ARENA_MAX))
