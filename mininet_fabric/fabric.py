"""The Mininet/OVS fabric harness: one context manager that brings up a topology
description as real Open vSwitch switches and Mininet hosts, and always takes it down.

    from mininet_fabric.fabric import Fabric
    with Fabric("two-rack") as fab:                      # standalone L2 learning
        print(fab.ping_all())                            # loss in percent
        p = fab.popen("h3", "iperf3", "-s", "-1")
    with Fabric("fat-tree", controller="127.0.0.1:6653") as fab:   # your os-ken controller
        ...
    with Fabric("two-pod", controller={"tor1": "127.0.0.1:6653", ...}) as fab:
        ...                                  # a controller per pod: one per switch named

What ``__enter__`` does, in order: take the global fabric lock (``mininet_fabric/lock.py``),
check root and Open vSwitch (starting it if needed), remove a crashed run's leftovers,
build the net with ``OVSSwitch(datapath='user', protocols='OpenFlow13')`` — fail mode
``standalone`` without a controller on a loop-free topology, ``secure`` with a controller
(switches keep their rules while it is away) or on a topology with loops (standalone
learning would storm there; forwarding waits for a controller) — then, per docs/design.md:
offloads off on every interface (TCP stalls on the userspace datapath otherwise), IPv6 off
(its chatter would only confuse flow recognition), with ``management=`` (a
``mininet_fabric.management.ManagementNet``) every host's veth on the management network
(its path to the controller's API, off the data plane), and the HTB rate + priority tree of
``mininet_fabric/priority.py`` on every switch egress port. With a controller it waits
until every switch is connected.

``__exit__`` (also reached on SIGTERM/SIGHUP, which are turned into SystemExit while the
fabric is up) stops every process started with :meth:`Fabric.popen`, detaches the hosts
from the management network, stops the net,
removes any leftovers and releases the lock.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Mapping

import networkx as nx

from mininet_fabric import priority
from mininet_fabric.lock import FabricError, FabricLock
from mininet_fabric.system import (cleanup_leftovers, ensure_ovs, record_host_namespaces,
                                  require_root, tune_ovs_send_buffer)
from sluice_common.errors import InputError, option_error
from topologies import Topology, load_topology
from topologies import priority_classes as pc
from topologies.mininet_topo import build_mininet_topo, check_emulatable, emulated_links, port_map

__all__ = ["Fabric", "FabricError", "ensure_ovs", "cleanup_leftovers", "parse_controller",
           "has_loops"]

_PING_RE = re.compile(r"(\d+) packets transmitted, (\d+) received")
_active: "Fabric | None" = None  # the fabric this process has up (at most one)


def parse_controller(text: str, field: str = "controller") -> tuple[str, int]:
    """``"127.0.0.1:6653"`` -> ``("127.0.0.1", 6653)``; otherwise an option error naming
    ``field`` (a CLI names its flag)."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host:
        raise option_error(field, f"must look like HOST:PORT (e.g. 127.0.0.1:6653), got {text!r}")
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        raise option_error(field, f"controller host must be an IPv4 address, got {host!r}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise option_error(field, f"controller port must be 1..65535, got {port!r}")
    return host, int(port)


def _switch_controllers(topology: Topology, given: Mapping[str, str]
                        ) -> dict[str, tuple[str, int]]:
    """Switch name -> (host, port) of its controller; every switch named, no other."""
    names = {s.name for s in topology.switches}
    unknown, missing = sorted(set(given) - names), sorted(names - set(given))
    if unknown or missing:
        raise option_error("controller", f"a controller per switch of {topology.name}: "
                           f"unknown {unknown}, missing {missing}")
    return {name: parse_controller(text, f"controller.{name}") for name, text in given.items()}


def has_loops(topology: Topology) -> bool:
    """True when the switch fabric has a cycle (standalone L2 learning would storm)."""
    return not nx.is_forest(topology.graph)


def _progress(enabled: bool, text: str) -> None:
    if enabled:
        print(f"fabric: {text}", file=sys.stderr, flush=True)


# Host TCP settings (per namespace). Empty until measured to help (bench/RESULTS.md).
HOST_TCP_TUNING: dict[str, str] = {}


class Fabric:
    """A running emulated fabric. See the module doc for what it sets up."""

    def __init__(self, topology: Topology | str,
                 controller: str | Mapping[str, str] | None = None,
                 priority_levels: int = pc.LEVELS, *, wait_connected_s: float = 30.0,
                 lock_timeout: float | None = None, progress: bool = True,
                 tcp_congestion: str | None = "cubic",
                 host_sysctls: dict[str, str] | None = None, management: Any = None):
        self.topology = topology if isinstance(topology, Topology) else load_topology(topology)
        check_emulatable(self.topology)
        # a mapping: each switch's own controller (a controller per pod, docs/deploy.md)
        self.switch_controllers = _switch_controllers(self.topology, controller) \
            if isinstance(controller, Mapping) else {}
        if self.switch_controllers:
            self.controller = min(self.switch_controllers.values())
        else:
            self.controller = parse_controller(controller) if controller else None
        if not 1 <= int(priority_levels) <= pc.LEVELS:
            raise InputError("priority_levels", f"must be 1..{pc.LEVELS}, got {priority_levels}")
        self.priority_levels = int(priority_levels)
        self.wait_connected_s = wait_connected_s
        self.lock_timeout = lock_timeout
        self.progress = progress
        self.tcp_congestion = tcp_congestion  # per host namespace; None = machine default
        # Extra per-host-namespace sysctls (e.g. HOST_TCP_TUNING); None: the kernel's.
        self.host_sysctls = dict(HOST_TCP_TUNING if host_sysctls is None else host_sysctls)
        # a mininet_fabric.management.ManagementNet: every host gets its path to the
        # controller's API there, off the data plane (None: no such path)
        self.management = management
        self.loops = has_loops(self.topology)
        self.fail_mode = "secure" if (self.controller or self.loops) else "standalone"
        self.links = emulated_links(self.topology)
        self.ports = port_map(self.topology)
        self.net: Any = None
        self._lock: FabricLock | None = None
        self._procs: list[subprocess.Popen] = []
        self._old_handlers: dict[int, Any] = {}
        self.lost_pairs: list[str] = []     # the last ping_all's pairs short of replies

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "Fabric":
        global _active
        if _active is not None:
            # The lock is re-entrant within a process, so without this check a second
            # Fabric would "clean up" the first one's switches from under it.
            raise FabricError(f"a fabric ({_active.topology.name}) is already up in this "
                              "process; use it, or leave its `with` block first")
        _active = self
        try:
            self._lock = FabricLock(f"Fabric({self.topology.name}) {' '.join(sys.argv)[:100]}",
                                    timeout=self.lock_timeout).acquire()
            self._install_signal_handlers()
            require_root()
            ensure_ovs()
            cleanup_leftovers()
            if tune_ovs_send_buffer():
                _progress(self.progress, "restarted ovs-vswitchd with an 8 MiB send buffer")
            self._build()
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._teardown()

    def _build(self) -> None:
        from mininet.link import Link
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import OVSSwitch, RemoteController

        setLogLevel("error")  # Mininet's chatter goes to stdout; ours is on stderr
        t = self.topology
        started = time.monotonic()
        _progress(self.progress, f"building {t.name}: {len(t.switches)} switches, "
                  f"{len(t.hosts)} hosts, fail mode {self.fail_mode}"
                  + (f", {len(set(self.switch_controllers.values()))} controllers"
                     if self.switch_controllers else
                     f", controller {self.controller[0]}:{self.controller[1]}"
                     if self.controller else ""))
        if self.loops and not self.controller:
            _progress(self.progress, "the topology has loops and no controller was given: "
                      "switches stay in secure mode and forward nothing until one connects")

        own = self.switch_controllers

        class FabricSwitch(OVSSwitch):
            def __init__(sw, name, **params):
                # reconnectms: retry a missing controller every second, not up to 8 s.
                OVSSwitch.__init__(sw, name, datapath="user", protocols="OpenFlow13",
                                   failMode=self.fail_mode, reconnectms=1000, **params)

            def start(sw, controllers):
                if own:           # only the switch's own controller (a controller per pod)
                    controllers = [c for c in controllers if (c.ip, c.port) == own[sw.name]]
                OVSSwitch.start(sw, controllers)

        self.net = Mininet(topo=build_mininet_topo(t), switch=FabricSwitch, link=Link,
                           controller=None, autoSetMacs=False, build=False)
        for i, (host, port) in enumerate(sorted(set(self.switch_controllers.values())
                                                or ([self.controller] if self.controller
                                                    else []))):
            self.net.addController(f"c{i}", controller=RemoteController, ip=host, port=port)
        self.net.build()
        record_host_namespaces([h.pid for h in self.net.hosts])
        self.net.start()
        self._configure_interfaces()
        if self.management is not None:       # after IPv6 is off: mgmt0 comes up without it
            self.management.attach([self.net.get(h.name) for h in t.hosts])
        self.install_priority_tree()
        if self.controller and self.wait_connected_s:
            self.wait_connected(self.wait_connected_s)
        _progress(self.progress, f"{t.name} is up ({time.monotonic() - started:.1f} s)")

    def _configure_interfaces(self) -> None:
        ipv6_off = "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
        # Hosts use loss-based CUBIC, Linux's usual default and what training nodes run,
        # not this machine's BBR: BBR paces itself below the bottleneck and keeps queues
        # short, so how the priority classes fill would depend on the emulation host.
        cc = f"sysctl -qw net.ipv4.tcp_congestion_control={self._allow_congestion_control()}"
        for h in self.net.hosts:
            h.cmd(ipv6_off)
            if self.tcp_congestion:
                out = h.cmd(cc + " 2>&1")
                if out.strip():
                    raise FabricError(f"setting TCP congestion control on {h.name}: {out.strip()}")
            if self.host_sysctls:
                out = h.cmd("sysctl -qw " + " ".join(shlex.quote(f"{k}={v}") for k, v in
                                                    sorted(self.host_sysctls.items())) + " 2>&1")
                if out.strip():
                    raise FabricError(f"setting {self.host_sysctls} on {h.name}: {out.strip()}")
            for intf in h.intfNames():
                if intf != "lo":
                    h.cmd(f"ethtool -K {intf} tx off rx off >/dev/null 2>&1")
        root_cmds = []
        for link in self.links:
            for node, intf in ((link.a, link.intf_a), (link.b, link.intf_b)):
                if node in self.ports:  # switch side: root namespace
                    root_cmds.append(f"ethtool -K {intf} tx off rx off >/dev/null 2>&1")
                    root_cmds.append(f"sysctl -qw net.ipv6.conf.{intf}.disable_ipv6=1 >/dev/null")
        subprocess.run(["sh", "-c", "; ".join(root_cmds) or "true"], timeout=120)

    def _allow_congestion_control(self) -> str:
        """A network namespace may only default to algorithms on the machine-wide allowed
        list (here 'reno bbr'). Add ours to it (that only lets unprivileged programs pick
        it too); fall back to reno, also loss-based, if the list cannot be changed."""
        wanted = self.tcp_congestion
        allowed_path = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
        available = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
        allowed = open(allowed_path).read().split()
        if wanted in allowed:
            return wanted
        if wanted in available:
            try:
                with open(allowed_path, "w") as f:
                    f.write(" ".join(allowed + [wanted]))
                _progress(self.progress, f"allowed TCP congestion control '{wanted}' machine-wide")
                return wanted
            except OSError:
                pass
        _progress(self.progress, f"TCP congestion control '{wanted}' not usable here; hosts use reno")
        return "reno"

    def install_priority_tree(self, tree=None) -> None:
        """(Re)install the HTB rate + priority tree on every interface; idempotent.
        ``tree(intf, rate_mbit, levels)``: the switch ports' tc lines instead of
        ``priority.priority_tree`` (a baseline's, ``mininet_fabric/baselines.py``)."""
        tree = tree or priority.priority_tree
        root_lines = []
        for link in self.links:
            for node, intf in ((link.a, link.intf_a), (link.b, link.intf_b)):
                if node in self.ports:  # a switch port, in the root namespace
                    root_lines += [f"qdisc del dev {intf} root"]
                    root_lines += tree(intf, link.bw_mbit, self.priority_levels)
                else:  # a host NIC: rate only, inside the host's namespace
                    self._tc_batch(f"host {node}", [f"qdisc del dev {intf} root"]
                                   + priority.rate_limit(intf, link.bw_mbit), self.host(node))
        self._tc_batch("switch ports", root_lines)

    @staticmethod
    def _tc_batch(where: str, lines: list[str], host: Any = None) -> None:
        """Run tc batch lines (in ``host``'s namespace when given). The leading
        'qdisc del' fails harmlessly on a fresh interface; anything else failing is fatal."""
        deletes = [l for l in lines if l.startswith("qdisc del")]
        adds = [l for l in lines if not l.startswith("qdisc del")]
        with tempfile.NamedTemporaryFile("w", suffix=".tc", prefix="sluice-") as dels, \
                tempfile.NamedTemporaryFile("w", suffix=".tc", prefix="sluice-") as add:
            dels.write("\n".join(deletes) + "\n")
            add.write("\n".join(adds) + "\n")
            dels.flush()
            add.flush()
            script = f"tc -force -batch {dels.name} >/dev/null 2>&1; tc -batch {add.name} 2>&1; echo rc=$?"
            if host is not None:
                out = host.cmd(script)
            else:
                out = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                                     timeout=120).stdout
        if "rc=0" not in out:
            raise FabricError(f"installing the tc tree on {where} failed: {out.strip()[-500:]}")

    def priority_tree_intact(self) -> list[str]:
        """Switch interfaces whose root qdisc is no longer our HTB tree (empty = all fine)."""
        broken = []
        for link in self.links:
            for node, intf in ((link.a, link.intf_a), (link.b, link.intf_b)):
                if node in self.ports:
                    out = subprocess.run(["tc", "qdisc", "show", "dev", intf, "root"],
                                         capture_output=True, text=True).stdout
                    if f"htb {pc.HTB_ROOT_HANDLE}" not in out:
                        broken.append(intf)
        return broken

    def wait_connected(self, timeout: float) -> None:
        """Block until every switch is connected to the controller, or FabricError."""
        deadline = time.monotonic() + timeout
        pending = list(self.net.switches)
        while pending:
            pending = [s for s in pending if not s.connected()]
            if not pending:
                break
            if time.monotonic() > deadline:
                where = "their controllers" if self.switch_controllers else \
                    "the controller at {}:{}".format(*self.controller)
                raise FabricError(f"{len(pending)} switch(es) did not connect to {where} "
                                  f"within {timeout:.0f} s: "
                                  f"{', '.join(s.name for s in pending[:8])}")
            time.sleep(0.25)
        _progress(self.progress, f"all {len(self.net.switches)} switches connected")

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread

        def on_signal(signum, frame):
            raise SystemExit(128 + signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, on_signal)

    def _restore_signal_handlers(self) -> None:
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers.clear()

    def _teardown(self) -> None:
        global _active
        # Each step runs even if an earlier one failed: the point is to leave nothing.
        try:
            self.stop_processes()
            if self.management is not None:
                try:
                    self.management.detach()
                except Exception as err:  # the host ends go with their namespaces anyway
                    _progress(self.progress, f"detaching the management network failed ({err})")
            if self.net is not None:
                _progress(self.progress, f"tearing down {self.topology.name}")
                try:
                    self.net.stop()
                except Exception as err:  # leftovers are removed below anyway
                    _progress(self.progress, f"net.stop() failed ({err}); cleaning up")
                self.net = None
            if self._lock is not None:
                cleanup_leftovers()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            self._restore_signal_handlers()
            if _active is self:
                _active = None

    # ---- using the fabric --------------------------------------------------------------
    def _need_net(self):
        if self.net is None:
            raise FabricError("the fabric is not up (use it inside `with Fabric(...) as fab:`)")
        return self.net

    def host(self, name: str):
        return self._need_net().get(name)

    def switch(self, name: str):
        node = self._need_net().get(name)
        if name not in self.ports:
            raise KeyError(f"{name} is not a switch")
        return node

    def ip(self, name: str) -> str:
        return self.topology.host_by_name[name].ip

    def intf(self, switch: str, neighbour: str) -> str:
        """Interface on ``switch`` facing ``neighbour`` (its egress towards it)."""
        return f"{switch}-eth{self.ports[switch][neighbour]}"

    def cmd(self, host: str, *args: Any) -> str:
        """Run a shell command in ``host`` and return its output (blocking)."""
        return self.host(host).cmd(*args)

    def popen(self, host: str, *args: Any, **kwargs: Any) -> subprocess.Popen:
        """Start a process in ``host``'s namespaces; stopped automatically on teardown."""
        proc = self.host(host).popen(*args, **kwargs)
        self._procs.append(proc)
        return proc

    def stop_processes(self, grace_s: float = 2.0) -> None:
        procs, self._procs = self._procs, []
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + grace_s
        for p in procs:
            try:
                p.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def dump_flows(self, switch: str) -> str:
        self.switch(switch)
        return subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", switch],
                              capture_output=True, text=True, timeout=30).stdout

    def class_stats(self, intf: str) -> dict[str, dict[str, int]]:
        """HTB class counters of a switch interface: ``{classid: {bytes, packets, dropped}}``."""
        out = subprocess.run(["tc", "-s", "class", "show", "dev", intf], capture_output=True,
                             text=True, timeout=30).stdout
        return priority.parse_class_stats(out)

    def ping_all(self, timeout_s: int = 2, count: int = 1) -> float:
        """Ping every ordered pair of hosts (``count`` pings each); loss in percent.
        ``timeout_s`` is how long a reply may take: a pair's first packet goes through the
        userspace datapath's upcall and the controller's packet-in, which took over 1 s
        once on a loaded CI host with two cores (a late reply, counted as a lost one)."""
        hosts = [h.name for h in self.topology.hosts]
        sent = received = 0
        self.lost_pairs = []
        for a in hosts:
            for b in hosts:
                if a == b:
                    continue
                out = self.cmd(a, f"ping -c{count} -W{timeout_s} -i0.2 {self.ip(b)}")
                m = _PING_RE.search(out)
                sent += count
                got = int(m.group(2)) if m else 0
                received += got
                if got < count:
                    self.lost_pairs.append(f"{a}->{b}")
        return 100.0 * (sent - received) / sent if sent else 0.0
