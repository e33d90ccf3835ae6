"""Free loopback ports for PS jobs, controllers and services started on this machine.

A job needs a block of consecutive ports (``ps_runtime.plan.PortPlan``); tests and
benchmarks may run beside other jobs, so a block is drawn at random and checked by
binding every port of it.
"""

from __future__ import annotations

import os
import random
import socket
import time


def free_port() -> int:
    """One port the kernel says is free on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_block(n: int = 8) -> int:
    """The first port of ``n`` consecutive free ports on 127.0.0.1."""
    rng = random.Random(os.getpid() ^ time.time_ns())
    for _ in range(200):
        base = rng.randrange(30000, 60000, 50)
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free block of ports on 127.0.0.1")
