"""Children exit when their launcher is gone, even if it was SIGKILLed.

The launcher puts its pid in ``SLUICE_LAUNCHER_PID``; each PS process starts a daemon
thread that checks every second that this pid still lives and hard-exits otherwise.
(``PR_SET_PDEATHSIG`` is not used: it fires when the *thread* that forked exits, and
Mininet's ``mnexec`` sits between us and the child anyway.) Mininet hosts share the
machine's pid namespace, so the check works inside them too.
"""

from __future__ import annotations

import os
import sys
import threading
import time

ENV = "SLUICE_LAUNCHER_PID"


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_started = False
_started_once = False       # the fork hook is registered once per process image


def _restart_in_child() -> None:
    """A thread does not survive ``fork``: a child forked from a watched process (the
    fork server of ``ps_runtime.zygote``) starts its own watchdog."""
    global _started
    if _started:
        _started = False
        start_watchdog()


def start_watchdog(interval: float = 1.0) -> None:
    global _started, _started_once
    pid = int(os.environ.get(ENV, "0") or 0)
    if pid <= 0 or _started:
        return
    if not _started_once:
        os.register_at_fork(after_in_child=_restart_in_child)
    _started = _started_once = True

    def watch() -> None:
        while process_alive(pid):
            time.sleep(interval)
        print(f"launcher {pid} is gone; exiting", file=sys.stderr, flush=True)
        os._exit(3)

    threading.Thread(target=watch, name="launcher-watchdog", daemon=True).start()
