"""How a PS process is started: on this machine, or inside a Mininet host.

Both runners return a ``subprocess.Popen`` whose pid leads its own process group (a new
session), so the launcher stops a process and everything it forked with one
``killpg``. Local processes get ``start_new_session``; Mininet's ``Node.popen`` runs the
command through ``mnexec -d``, which calls ``setsid`` itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import IO, Protocol

REPO_ROOT = Path(__file__).resolve().parent.parent


class ProcessRunner(Protocol):
    def start(self, host: str, argv: list[str], env: dict[str, str], log: IO,
              stdin=subprocess.DEVNULL) -> subprocess.Popen:
        """Start ``argv`` on ``host`` with ``env`` added to the environment, stdout and
        stderr to ``log`` (stdin: ``subprocess.PIPE`` for a warm process, see ps_runtime.warm)."""


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    # The processes import ps_runtime from this checkout wherever they run.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


class LocalRunner:
    """Processes on this machine; ``host`` is only a label."""

    def start(self, host: str, argv: list[str], env: dict[str, str], log: IO,
              stdin=subprocess.DEVNULL) -> subprocess.Popen:
        return subprocess.Popen(argv, env=_environment(env), stdout=log, stderr=subprocess.STDOUT,
                                stdin=stdin, cwd=REPO_ROOT, start_new_session=True)


class MininetRunner:
    """Processes inside the network namespace of a Mininet host, through the fabric
    harness (``mininet_fabric.fabric.Fabric.popen``, which also stops them at teardown)."""

    def __init__(self, fabric):
        self.fabric = fabric

    def start(self, host: str, argv: list[str], env: dict[str, str], log: IO,
              stdin=subprocess.DEVNULL) -> subprocess.Popen:
        # Mininet's Node.popen wraps argv in `mnexec -da <pid>`: same pid, new session,
        # the host's network namespace.
        return self.fabric.popen(host, argv, env=_environment(env), stdout=log,
                                 stderr=subprocess.STDOUT, stdin=stdin,
                                 cwd=str(REPO_ROOT))


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Signal the process group led by ``proc`` (quietly if it is already gone)."""
    if proc.poll() is not None:
        # The leader is reaped; children it left in the group may still live.
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        proc.send_signal(sig)
