"""Install MXNet, the PS transport, the first time a PS job needs it and it is missing.

MXNet 1.9.1 is sluice's ps-lite transport, but it cannot be an ordinary dependency: its
metadata caps ``numpy<2`` (a cap that predates numpy 2; ``ps_runtime.numpy_compat`` makes
it run there), so ``pip install sluice 'numpy>=2'`` would be refused by the resolver. The
Makefile installs it with ``--no-deps``; a user who installed the package with pip gets the
same step done here, announced, the first time ``sluice train`` needs it. Set
``SLUICE_NO_AUTO_INSTALL=1`` to be told the command instead (offline or locked-down hosts).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from typing import Callable, Sequence

MXNET_PIN = "mxnet==1.9.1"
MXNET_INSTALL_COMMAND = ("python", "-m", "pip", "install", "--no-deps", MXNET_PIN)
OPT_OUT_ENV = "SLUICE_NO_AUTO_INSTALL"


class TransportMissing(RuntimeError):
    """MXNet is absent and was not (or could not be) installed; the message says how."""


def mxnet_present() -> bool:
    return importlib.util.find_spec("mxnet") is not None


def install_command(python: str = sys.executable) -> list[str]:
    return [python, *MXNET_INSTALL_COMMAND[1:]]


def ensure_mxnet(*, python: str = sys.executable,
                 run: Callable[[Sequence[str]], int] = lambda cmd: subprocess.call(list(cmd)),
                 announce: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr),
                 present: Callable[[], bool] = mxnet_present) -> bool:
    """Return False when MXNet was already there, True when it was installed now.

    Raises :class:`TransportMissing` when the opt-out is set or pip fails."""
    if present():
        return False
    hint = " ".join(MXNET_INSTALL_COMMAND)
    if os.environ.get(OPT_OUT_ENV, "") not in ("", "0"):
        raise TransportMissing(f"MXNet (the PS transport) is not installed and {OPT_OUT_ENV} "
                               f"is set; install it with: {hint}")
    cmd = install_command(python)
    announce(f"sluice: MXNet (the PS transport) is missing; installing it once: {' '.join(cmd)} "
             f"(--no-deps: its numpy<2 cap is not a real need; set {OPT_OUT_ENV}=1 to skip)")
    if run(cmd) != 0:
        raise TransportMissing(f"installing MXNet failed; install it with: {hint}")
    importlib.invalidate_caches()
    if not present():
        raise TransportMissing(f"MXNet is still not importable after pip; install it with: {hint}")
    return True
