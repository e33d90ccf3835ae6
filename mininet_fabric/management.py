"""The emulated fabric's management network: every Mininet host's path to the root
namespace that does not cross the OVS data plane, as a real cluster's nodes reach the
controller over their management network.

    with ManagementNet() as mgmt, \\
            controller_process(..., api_host=mgmt.address) as (ofp, client), \\
            Fabric(topology, controller=ofp, management=mgmt) as fab:
        ...   # a worker on any host reports to http://{mgmt.address}:PORT itself

A Linux bridge in the root namespace (:data:`BRIDGE`, address :data:`ADDRESS`/16 in
198.18.0.0/15, the range RFC 2544 sets aside for benchmarking, which no real network
routes and which lies outside the hosts' 10.0.0.0/8) and a veth per host: the root end
(``slmg<i>``) on the bridge, the other end (``mgmt0``) in the host's network namespace
with the host's management address and a /16 route on it. The host's data-plane route
(its /8 on ``eth0``) is untouched, so nothing of a job's traffic takes this path and
nothing on it is seen, ranked or shaped by the controller. The root namespace reaches
the bridge's address as its own, so one URL (the controller's API listening there) is
good for the run loop, the scheduler service and every worker.

Why a context of its own, entered before the controller: the controller's API binds to
the bridge's address when it starts, and the fabric connects to an already running
controller. The :class:`~mininet_fabric.fabric.Fabric` given ``management=`` attaches its
hosts when it builds the net and detaches them when it is torn down; :meth:`__exit__`
removes the bridge. It holds the fabric lock for its whole life (re-entrant within one
process: the fabric takes it again), and removes a crashed run's bridge and root-end
veths on entry. ``cleanup_leftovers`` (mininet_fabric/system.py) leaves them alone: it
runs inside the fabric's own start, while this network is live.
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
from typing import Any, Sequence

from mininet_fabric.lock import FabricError, FabricLock
from mininet_fabric.system import link_names, require_root

BRIDGE = "slmgmt0"                 # root namespace (no Mininet "-eth<N>" name: not swept)
ROOT_END = "slmg{}"                # a host's veth, root end, on the bridge
HOST_END = "mgmt0"                 # the same veth, in the host's namespace
NETWORK = ipaddress.IPv4Network("198.18.0.0/16")
ADDRESS = str(NETWORK.network_address + 1)      # the bridge's: where the controller listens
_ROOT_END_RE = re.compile(r"^slmg\d+$")


def host_addresses(hosts: Sequence[str]) -> dict[str, str]:
    """Host name -> its management address (in ``hosts``' order, after the bridge's);
    FabricError when the network has too few."""
    room = NETWORK.num_addresses - 3                # network, bridge, broadcast
    if len(hosts) > room:
        raise FabricError(f"the management network {NETWORK} has room for {room} hosts, "
                          f"not {len(hosts)}")
    first = int(NETWORK.network_address) + 2
    return {h: str(ipaddress.IPv4Address(first + i)) for i, h in enumerate(hosts)}


def attach_lines(index: int, host_pid: int) -> list[str]:
    """``ip -batch`` lines (root namespace) giving host ``index`` (its shell ``host_pid``)
    its veth on the bridge."""
    root = ROOT_END.format(index)
    return [f"link add {root} type veth peer name {HOST_END} netns {host_pid}",
            f"link set {root} master {BRIDGE} up"]


def host_command(address: str) -> str:
    """The shell command, in the host's namespace, bringing its end up at ``address``."""
    return (f"ip addr add {address}/{NETWORK.prefixlen} dev {HOST_END} && "
            f"ip link set {HOST_END} up && echo rc=0")


def _ip_batch(lines: list[str], force: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *(["-force"] if force else []), "-batch", "-"],
                          input="".join(line + "\n" for line in lines), text=True,
                          capture_output=True, timeout=120)


def remove_leftovers() -> int:
    """Delete the bridge and root-end veths a crashed run left (each host end goes with
    its pair). Returns how many were deleted."""
    stale = [n for n in link_names() if n == BRIDGE or _ROOT_END_RE.match(n)]
    if stale:
        _ip_batch([f"link delete dev {n}" for n in stale], force=True)
    return len(stale)


class ManagementNet:
    """The management bridge, its address and the hosts attached to it (module doc)."""

    address = ADDRESS

    def __init__(self, lock_timeout: float | None = None) -> None:
        self.lock_timeout = lock_timeout
        self.addresses: dict[str, str] = {}      # attached host -> its address
        self._root_ends: list[str] = []
        self._lock: FabricLock | None = None

    def url(self, port: int, scheme: str = "http") -> str:
        return f"{scheme}://{self.address}:{port}"

    def __enter__(self) -> "ManagementNet":
        require_root()
        self._lock = FabricLock("management network", timeout=self.lock_timeout).acquire()
        try:
            remove_leftovers()
            out = _ip_batch([f"link add {BRIDGE} type bridge",
                             f"addr add {ADDRESS}/{NETWORK.prefixlen} dev {BRIDGE}",
                             f"link set {BRIDGE} up"])
            if out.returncode != 0:
                raise FabricError(f"creating the management bridge {BRIDGE} failed: "
                                  f"{(out.stdout + out.stderr).strip()[-500:]}")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.detach()
            remove_leftovers()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def attach(self, hosts: Sequence[Any]) -> None:
        """Give every host (Mininet nodes, with ``name``, ``pid`` and ``cmd``) its veth on
        the bridge and its address; FabricError naming the host that failed."""
        addresses = host_addresses([h.name for h in hosts])
        start = len(self._root_ends)
        lines = [line for i, h in enumerate(hosts) for line in attach_lines(start + i, h.pid)]
        self._root_ends += [ROOT_END.format(start + i) for i in range(len(hosts))]
        out = _ip_batch(lines)
        if out.returncode != 0:
            raise FabricError("attaching the hosts to the management network failed: "
                              f"{(out.stdout + out.stderr).strip()[-500:]}")
        for h in hosts:
            said = h.cmd(host_command(addresses[h.name]) + " 2>&1")
            if "rc=0" not in said:
                raise FabricError(f"bringing up {HOST_END} on {h.name} failed: {said.strip()[-300:]}")
            self.addresses[h.name] = addresses[h.name]

    def detach(self) -> None:
        """Delete every attached host's veth (both ends); idempotent."""
        ends, self._root_ends = self._root_ends, []
        self.addresses = {}
        if ends:
            _ip_batch([f"link delete dev {n}" for n in ends], force=True)
