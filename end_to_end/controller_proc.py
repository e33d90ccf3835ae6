"""Start the sluice controller (``sluice controller``) as its own process for a run, and
always stop it: a context manager yielding the OpenFlow address for the fabric and a
``ControllerClient`` with the admin token.

The admin token is random per run and travels in the environment (SLUICE_ADMIN_TOKEN),
never on a command line that ``ps`` would show.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from controller.client import ControllerClient
from ps_runtime.ports import free_port
from sluice_common.errors import EXIT_BAD_INPUT, InputError


class ControllerStartError(RuntimeError):
    pass


def stop_process(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM (the controller and the scheduler save state and exit), SIGKILL after
    ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_healthy(client, proc: subprocess.Popen, log_path: Path, timeout: float, what: str,
                 error: type[Exception] = RuntimeError) -> None:
    """Until ``client.health()`` answers; ``error`` when ``proc`` (``what``) exits first
    (with the end of its log) or after ``timeout`` seconds. A service that refused what it
    was given (exit status 2, its own ``error:`` lines) raises InputError with those
    lines: a clear message, not a failure of this run's code."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            text = log_path.read_text(errors="replace")
            refused = refusal_lines(text) if proc.returncode == EXIT_BAD_INPUT else []
            if refused:
                raise InputError(f"{what} refused to start", "; ".join(refused))
            raise error(f"{what} exited with {proc.returncode}: {text[-2000:]}")
        try:
            client.health()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise error(f"{what} did not answer in {timeout:.0f} s (log: {log_path})")
            time.sleep(0.2)


def refusal_lines(log_text: str) -> list[str]:
    """What a ``sluice`` command said it refused (``sluice X: error: REASON``): each
    REASON, in order."""
    out = []
    for line in log_text.splitlines():
        head, sep, reason = line.partition(": error: ")
        if sep and head.startswith("sluice ") and reason.strip():
            out.append(reason.strip())
    return out


@contextmanager
def controller_process(topology_arg: str, log_path: Path, *, startup_s: float = 30.0,
                       stats_interval: float = 1.0, rank: str | None = None,
                       extra_args: tuple[str, ...] = (), api_host: str = "127.0.0.1"
                       ) -> Iterator[tuple[str, ControllerClient]]:
    """``api_host``: where the API listens (on the emulated fabric the management
    network's address, mininet_fabric/management.py, which the workers on every host
    reach to report their progress themselves)."""
    ofp, api = free_port(), free_port()
    token = secrets.token_urlsafe(18)
    env = dict(os.environ, SLUICE_ADMIN_TOKEN=token)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "sluice", "controller", "--topology",
                             topology_arg, "--ofp-port", str(ofp), "--api", f"{api_host}:{api}",
                             "--stats-interval", str(stats_interval), "--log-level", "warning"]
                            + (["--rank", rank] if rank else []) + list(extra_args),
                            env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    client = ControllerClient(f"http://{api_host}:{api}", token)
    try:
        wait_healthy(client, proc, log_path, startup_s, "the controller",
                     ControllerStartError)
        yield f"127.0.0.1:{ofp}", client
    finally:
        client.close()
        stop_process(proc, timeout=10)
        log.close()
