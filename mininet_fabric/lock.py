"""The global fabric lock: one Mininet/OVS fabric on this machine at a time.

Several people and test processes share one Open vSwitch and one set of interface names
(``tor1-eth1`` ...), so every fabric user takes an exclusive ``fcntl.flock`` on
``/run/sluice-fabric.lock`` first (override the path with ``SLUICE_FABRIC_LOCK``). The
kernel drops the lock when the holder dies, even by SIGKILL, so a crashed run never
wedges the next one; its leftovers are removed by ``cleanup_leftovers`` under the lock.

The lock is re-entrant within one process (``sluice fabric clean`` inside a running
``Fabric`` just nests), because flock on a second file description of the same process
would otherwise deadlock against itself.
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
import time
from pathlib import Path

DEFAULT_LOCK_PATH = "/run/sluice-fabric.lock"
DEFAULT_TIMEOUT_S = 1200.0  # an end-to-end run may hold the fabric for several minutes


class FabricError(RuntimeError):
    """The fabric cannot be brought up or used (environment, not user input)."""


def lock_path() -> Path:
    return Path(os.environ.get("SLUICE_FABRIC_LOCK", DEFAULT_LOCK_PATH))


def default_timeout() -> float:
    try:
        return float(os.environ.get("SLUICE_FABRIC_LOCK_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S


_held_lock = threading.RLock()   # guards the two fields below
_held_fd: int | None = None
_held_depth = 0


def _holder_text(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 300).decode(errors="replace").strip() or "unknown holder"
    except OSError:
        return "unknown holder"


class FabricLock:
    """``with FabricLock(what="pytest test_fabric"):`` — blocks up to ``timeout`` seconds,
    printing who holds the lock while it waits."""

    def __init__(self, what: str = "", timeout: float | None = None, path: Path | None = None,
                 poll_s: float = 0.5):
        self.what = what or " ".join(sys.argv)[:120]
        self.timeout = default_timeout() if timeout is None else timeout
        self.path = Path(path) if path else lock_path()
        self.poll_s = poll_s

    def acquire(self) -> "FabricLock":
        global _held_fd, _held_depth
        with _held_lock:
            if _held_fd is not None:
                _held_depth += 1
                return self
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            deadline = time.monotonic() + self.timeout
            next_note = 0.0
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    now = time.monotonic()
                    if now >= deadline:
                        holder = _holder_text(fd)
                        os.close(fd)
                        raise FabricError(f"timed out after {self.timeout:.0f} s waiting for the "
                                          f"fabric lock {self.path} (held by: {holder})")
                    if now >= next_note:
                        print(f"fabric: waiting for the fabric lock {self.path}, held by: "
                              f"{_holder_text(fd)}", file=sys.stderr, flush=True)
                        next_note = now + 30
                    time.sleep(self.poll_s)
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"pid {os.getpid()} since {time.strftime('%H:%M:%S')}: "
                         f"{self.what}\n".encode())
            _held_fd, _held_depth = fd, 1
            return self

    def release(self) -> None:
        global _held_fd, _held_depth
        with _held_lock:
            if _held_fd is None:
                return
            _held_depth -= 1
            if _held_depth > 0:
                return
            fd, _held_fd = _held_fd, None
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> "FabricLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
