"""A real `sluice controller` process for tests: started, waited for, stopped; and what
the fabric tests read back from it (hosts located, DSCP marks on a switch)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from controller.client import ControllerClient

# The interpreter under test, not a .venv path: the suite runs in any environment.
SLUICE = [sys.executable, "-m", "sluice"]
ADMIN = "fabric-test-admin-token"



def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s: never leave a controller behind."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_controller(topology: str, ofp: int, api: int, log, *extra: str
                     ) -> tuple[subprocess.Popen, ControllerClient]:
    """Start a real `sluice controller` process and wait until its API answers."""
    env = dict(os.environ, SLUICE_ADMIN_TOKEN=ADMIN)
    proc = subprocess.Popen([*SLUICE, "controller", "--topology", topology, "--ofp-port",
                             str(ofp), "--api", f"127.0.0.1:{api}", *extra],
                            env=env, stdout=log, stderr=log)
    client = ControllerClient(f"http://127.0.0.1:{api}", ADMIN)
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"controller exited with {proc.returncode}: {log.read()}")
        try:
            if client.health():
                return proc, client
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop(proc)                 # never leave a half-started controller behind
            raise AssertionError("controller API did not come up within 20 s")
        time.sleep(0.1)


def wait_located(client: ControllerClient, hosts: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"^sluice_hosts_located (\d+)", client.metrics(), re.M)
        if m and int(m.group(1)) == hosts:
            return
        time.sleep(0.2)
    raise AssertionError(f"the controller located fewer than {hosts} hosts:\n{client.metrics()}")


def dscp_marks(fab, switch: str, acks: bool = False) -> dict[int, int]:
    """cookie -> DSCP written by the data rules (``acks``: the ACK rules, which match the
    source port) on ``switch`` (from ovs-ofctl dump-flows)."""
    marks = {}
    for line in fab.dump_flows(switch).splitlines():
        if ("tp_src=" in line) != acks:
            continue
        cookie = re.search(r"cookie=0x([0-9a-f]+)", line)
        tos = re.search(r"mod_nw_tos:(\d+)", line)
        dscp = re.search(r"set_field:(\d+)->ip_dscp", line)
        if cookie and (tos or dscp):
            value = int(dscp.group(1)) if dscp else int(tos.group(1)) >> 2
            marks.setdefault(int(cookie.group(1), 16), set()).add(value)
    return marks
