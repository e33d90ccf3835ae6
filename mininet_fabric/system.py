"""The machine under the fabric: root, Open vSwitch, and removing a crashed run's leftovers.

We do not call ``mininet.clean.cleanup()`` (``mn -c``): it ``killall``s every process
named ``controller``, ``ping`` or ``ryu-manager`` and deletes ``/tmp/*.log`` — on a machine
shared with a running os-ken controller and other people's tests that is a disaster.
``cleanup_leftovers`` removes only what a Mininet fabric leaves behind:

1. Mininet node shells (``bash --norc -is mininet:<node>``, Mininet's own signature) and
   every process living in a Mininet host's network namespace (iperf3, ps-lite...), also
   when the shell is already gone (any non-root namespace holding a ``<node>-eth<N>``
   interface). The switch shells live in the root namespace: only the shells themselves
   are killed there.
2. Open vSwitch bridges (only the fabric creates bridges on this machine; it holds the
   lock while it does) and the tap devices the userspace datapath made for them.
3. Interfaces named like Mininet's ``<node>-eth<N>`` (stale veths are what makes the next
   run fail with "RTNETLINK answers: File exists").

It runs under the fabric lock, so it never pulls a fabric from under a live user. The
management network's bridge and veths (``mininet_fabric/management.py``) are not among
them: the fabric's own start runs this while that network is live; it removes its own
leftovers when it starts, and ``sluice fabric clean`` removes them too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from mininet_fabric.lock import FabricError, FabricLock

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"
MININET_SHELL = re.compile(r"^bash\0--norc\0-is\0mininet:([^\0]+)\0?$")
MININET_INTF = re.compile(r"^[\w.]+(?:-[\w.]+)*-eth\d+$")


def _run(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def require_root() -> None:
    if os.geteuid() != 0:
        raise FabricError("the Mininet fabric needs root (network namespaces, veths, tc); "
                          "run as root, e.g. `sudo make test`")


def ovs_running() -> bool:
    if shutil.which("ovs-vsctl") is None:
        return False
    try:
        return _run(["ovs-vsctl", "--timeout=3", "show"], timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def ensure_ovs() -> None:
    """Open vSwitch installed and running (userspace datapath is fine), or FabricError."""
    for tool in ("ovs-vsctl", "ovs-ofctl"):
        if shutil.which(tool) is None:
            raise FabricError(f"Open vSwitch is not installed ({tool} not found): run "
                              "`make setup` (apt-get install openvswitch-switch)")
    for tool in ("mnexec", "tc", "ethtool", "iperf3", "ping"):
        if shutil.which(tool) is None:
            raise FabricError(f"'{tool}' not found: run `make setup` (mininet, iproute2, ethtool, "
                              "iperf3, iputils-ping)")
    if ovs_running():
        return
    require_root()
    if not os.path.exists(OVS_CTL):
        raise FabricError(f"Open vSwitch is not running and {OVS_CTL} is missing")
    result = _run([OVS_CTL, "start"], timeout=90)
    if not ovs_running():
        raise FabricError("Open vSwitch did not start: `ovs-ctl start` said:\n"
                          + (result.stdout + result.stderr)[-2000:])


# ovs-vswitchd's userspace datapath sends every packet of every port through ONE
# AF_PACKET socket, and packets waiting in our HTB queues stay charged to that socket's
# send buffer. At the default 208 KiB (~90 frames) the buffer fills long before a class
# queue does, and OVS drops with EAGAIN ("error sending Ethernet packet ... Resource
# temporarily unavailable") regardless of class: the urgent flow loses packets, never
# builds a queue, and a low class slips into the gaps (measured high/low 1.5..10 instead
# of > 20). The socket takes net.core.wmem_default when ovs-vswitchd opens it.
OVS_SEND_BUFFER = 8 << 20
WMEM_DEFAULT = "/proc/sys/net/core/wmem_default"


def ovs_send_buffer() -> int | None:
    """Send buffer (bytes) of ovs-vswitchd's shared packet socket; None before it exists."""
    out = _run(["ss", "-0", "-m", "-p", "-n"]).stdout
    for line in out.splitlines():
        if "ovs-vswitchd" in line and "[0]:*" in line:  # unbound: the shared send socket
            m = re.search(r"tb(\d+)", line)
            if m:
                return int(m.group(1))
    return None


def tune_ovs_send_buffer() -> bool:
    """Make sure ovs-vswitchd's send socket is OVS_SEND_BUFFER large. Raises the machine's
    net.core.wmem_default (only the default for new non-TCP sockets) and, when the socket
    already exists with a small buffer, restarts ovs-vswitchd. Call it only when no bridge
    exists (under the fabric lock, after cleanup). Returns True when OVS was restarted."""
    require_root()
    if int(open(WMEM_DEFAULT).read()) < OVS_SEND_BUFFER:
        with open(WMEM_DEFAULT, "w") as f:
            f.write(str(OVS_SEND_BUFFER))
    current = ovs_send_buffer()
    if current is None or current >= OVS_SEND_BUFFER:
        return False
    if ovs_bridges():
        raise FabricError("refusing to restart Open vSwitch while bridges exist")
    result = _run([OVS_CTL, "--no-ovsdb-server", "restart"], timeout=90)
    if not ovs_running():
        raise FabricError("Open vSwitch did not come back after a restart: "
                          + (result.stdout + result.stderr)[-2000:])
    return True


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _netns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def mininet_shells() -> dict[int, str]:
    """``{pid: node name}`` of live Mininet node shells."""
    shells = {}
    for pid in _all_pids():
        m = MININET_SHELL.match(_read(f"/proc/{pid}/cmdline").decode(errors="replace"))
        if m:
            shells[pid] = m.group(1)
    return shells


def _has_mininet_interface(pid: int) -> bool:
    """Does the network namespace of ``pid`` hold an interface named like Mininet's?"""
    try:
        out = _run(["nsenter", f"--net=/proc/{pid}/ns/net", "ip", "-o", "link", "show"],
                   timeout=10).stdout
    except subprocess.TimeoutExpired:
        return False
    return any(MININET_INTF.match(line.split(":", 2)[1].strip().split("@", 1)[0])
               for line in out.splitlines() if line.count(":") >= 2)


def state_dir() -> Path:
    return Path(os.environ.get("SLUICE_FABRIC_STATE_DIR", "/run/sluice-fabric"))


def record_host_namespaces(pids: list[int]) -> None:
    """Remember the network namespaces of a fabric's hosts (by their shells' pids), so that
    a cleanup after this process dies can find processes left in them. A host namespace
    outlives its shell when something Mininet started detached (``mnexec -d``) is still in
    it, and once its veth is gone nothing else marks it as Mininet's."""
    namespaces = sorted({ns for pid in pids if (ns := _netns(pid))} - {_netns("self")})
    state_dir().mkdir(parents=True, exist_ok=True)
    path = state_dir() / f"{os.getpid()}.json"
    path.write_text(json.dumps({"pid": os.getpid(), "namespaces": namespaces}))


def _recorded_namespaces() -> tuple[set[str], list[Path]]:
    """Namespaces recorded by dead fabric processes (and by this one, which is tearing
    down); the state files to delete once they are emptied."""
    namespaces: set[str] = set()
    files = []
    for path in sorted(state_dir().glob("*.json")) if state_dir().is_dir() else []:
        try:
            data = json.loads(path.read_text())
            pid = int(data["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            files.append(path)
            continue
        if pid != os.getpid() and os.path.exists(f"/proc/{pid}"):
            continue  # a live fabric (another process): not ours to clean
        namespaces.update(data.get("namespaces", []))
        files.append(path)
    return namespaces, files


def _kill_leftover_processes() -> int:
    """Kill Mininet node shells and everything in a Mininet host's network namespace.

    A host's namespace can outlive its shell: a process Mininet started detached
    (``mnexec -d``) keeps it, and its veth, alive after the shell died with the crashed
    parent. So besides the shells' namespaces, every non-root namespace holding a
    ``<node>-eth<N>`` interface counts as a leftover Mininet host (we hold the fabric lock:
    no live fabric exists), and so does every namespace a dead fabric process recorded
    with :func:`record_host_namespaces` (it may hold nothing but ``lo`` by now)."""
    shells = mininet_shells()
    root_ns = _netns("self")
    by_ns: dict[str, list[int]] = {}
    for pid in _all_pids():
        ns = _netns(pid)
        if ns and ns != root_ns:
            by_ns.setdefault(ns, []).append(pid)
    host_namespaces = {ns for pid in shells if (ns := _netns(pid)) and ns != root_ns}
    recorded, state_files = _recorded_namespaces()
    host_namespaces |= recorded - {root_ns}
    host_namespaces |= {ns for ns, pids in by_ns.items()
                        if ns not in host_namespaces and _has_mininet_interface(pids[0])}
    victims = set(shells)
    for ns in host_namespaces:
        victims.update(by_ns.get(ns, []))
    victims.discard(os.getpid())
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") and
                                              b"State:\tZ" not in _read(f"/proc/{p}/status")
                                              for p in victims):
        time.sleep(0.05)
    for path in state_files:
        path.unlink(missing_ok=True)
    return len(victims)


def ovs_bridges() -> list[str]:
    if not ovs_running():
        return []
    out = _run(["ovs-vsctl", "--timeout=5", "list-br"]).stdout
    return [b for b in out.split() if b]


def _delete_bridges() -> list[str]:
    bridges = ovs_bridges()
    if bridges:
        cmd = ["ovs-vsctl", "--timeout=10"]
        for b in bridges:
            cmd += ["--", "--if-exists", "del-br", b]
        _run(cmd)
    return bridges


def link_names() -> list[str]:
    out = _run(["ip", "-o", "link", "show"]).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@", 1)[0])
    return names


def mininet_links() -> list[str]:
    return [n for n in link_names() if MININET_INTF.match(n)]


def _delete_links(names: list[str]) -> None:
    if not names:
        return
    batch = "".join(f"link delete dev {n}\n" for n in names)
    # -force: keep going past links that vanished with their peer.
    subprocess.run(["ip", "-force", "-batch", "-"], input=batch, text=True,
                   capture_output=True, timeout=60)


def leftovers() -> dict[str, list]:
    """What a crashed fabric would have left behind (empty lists when clean)."""
    return {"shells": sorted(mininet_shells().values()), "bridges": ovs_bridges(),
            "links": mininet_links()}


def cleanup_leftovers(lock_timeout: float | None = None) -> dict[str, int]:
    """Remove a crashed run's processes, bridges and veths (see module doc). Idempotent."""
    require_root()
    with FabricLock("cleanup_leftovers", timeout=lock_timeout):
        killed = _kill_leftover_processes()
        bridges = _delete_bridges()
        # The userspace datapath gives each bridge a tap device of the same name.
        present = set(link_names())
        stale = mininet_links() + [b for b in bridges if b in present]
        _delete_links(stale)
        remaining = mininet_links()
        if remaining:
            raise FabricError(f"could not delete stale interfaces: {', '.join(remaining[:10])}")
        return {"processes": killed, "bridges": len(bridges), "links": len(stale)}
