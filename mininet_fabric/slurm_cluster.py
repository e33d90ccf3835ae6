"""A real Slurm cluster (Debian's Slurm 22.05 + munge) on the emulated fabric: munged and
slurmctld in the root network namespace, one slurmd per Mininet host inside that host's
network namespace, every Slurm message between them crossing the OpenFlow fabric.

    with Fabric(topology, controller=ofp) as fab, \\
            SlurmCluster(fab, workdir, {h.name: h.gpus for h in topology.hosts}) as cluster:
        subprocess.run(["sinfo"], env={**os.environ, **cluster.env})

How the control traffic gets onto the fabric: slurmctld listens in the root namespace,
and the root namespace gets a port on the fabric, the *head node*: a veth from the root
namespace (``slhead-eth0``, address :func:`head_ip` with a /32 route to every host) into
the first rack's ToR switch. Slurmds reach slurmctld at that address, slurmctld (and any
Slurm command run in the root namespace, ``srun`` included) reaches each slurmd at its
node's fabric IP (``NodeAddr``), both ways through the switches. The sluice controller
admits only hosts its topology describes (source-address binding per port), so a fabric
run under the controller gives the controller :func:`with_head_node`'s topology: the
cluster's topology plus the head as a 0-GPU host in the first rack. The scheduler keeps
the plain topology (the head runs no job and Slurm has no node of that name).

Per node: ``NodeName`` = Mininet host name, ``NodeAddr`` = its fabric IP, GPUs as GRES on
fake device files (``mknod c 195 K``; count-only GRES fails at slurmd start), the node's
slurmd started as ``nsenter --net=/proc/<host shell pid>/ns/net unshare --uts sh -c
"hostname h1; exec slurmd -D -N h1"`` (``ip netns exec`` remounts /sys and breaks slurmd).
``topology.conf``: one leaf switch per rack (its ToR, with the rack's nodes) under one top
switch (the spine when the topology has exactly one, else ``fabric``).

Everything the cluster starts is its own child (``-D``/``-F`` foreground daemons) with a
parent-death signal, so nothing outlives the process that started it; :meth:`stop` kills
the daemons and every process left in a slurmd's UTS namespace (slurmstepd and job
processes), removes the head node's veth and the state directory. The caller holds the
fabric (and so the global fabric lock) for the whole life of the cluster.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mininet_fabric.lock import FabricError
# the configuration text, in a module of its own
from mininet_fabric.slurm_config import gres_conf, slurm_conf, topology_conf

if TYPE_CHECKING:  # pragma: no cover
    from mininet_fabric.fabric import Fabric
    from topologies import Topology

HEAD_NAME = "slurmhead"          # the head node's name in the controller's topology
HEAD_INTF = "slhead-eth0"        # root-namespace end (Mininet-like: a crash's leftovers are cleaned)
HEAD_PEER = "slheadsw-eth0"      # switch end, an OVS port of the first rack's ToR
NVIDIA_MAJOR = 195               # the character-device major of /dev/nvidia<K>
SLURM_BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sinfo", "scontrol")

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the process that started it dies."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def head_ip(topology: "Topology") -> str:
    """A free address in the hosts' /8 (Mininet gives hosts /8 prefixes): x.y.z.254 of the
    first host's /24, or the highest free one below it."""
    used = {h.ip for h in topology.hosts}
    first = ipaddress.IPv4Address(topology.hosts[0].ip)
    base = int(first) & 0xFFFFFF00
    for last in range(254, 0, -1):
        ip = str(ipaddress.IPv4Address(base + last))
        if ip not in used:
            return ip
    raise FabricError(f"no free address for the Slurm head node in {first}'s /24")


def with_head_node(topology: "Topology") -> "Topology":
    """``topology`` plus the head node (a 0-GPU host in the first rack at :func:`head_ip`):
    the topology to give the sluice controller, so that it admits Slurm's control traffic."""
    from dataclasses import replace

    from topologies.model import Host

    if HEAD_NAME in topology.host_by_name:
        return topology
    first = topology.hosts[0]
    head = Host(HEAD_NAME, topology.racks[0].name, 0, first.bw, head_ip(topology))
    return replace(topology, hosts=topology.hosts + (head,),
                   name=f"{topology.name}+{HEAD_NAME}")


def write_topology_yaml(topology: "Topology", path: Path) -> Path:
    """A topology as YAML (``sluice controller --topology PATH`` reads it)."""
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(topology.to_dict(), sort_keys=False))
    return path


def missing_binaries() -> list[str]:
    return [b for b in SLURM_BINARIES if shutil.which(b) is None
            and not Path("/usr/sbin", b).exists()]


# ---- the cluster --------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    out = []
    for p in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(p))
    return out


def _progress(text: str) -> None:
    print(f"slurm: {text}", file=sys.stderr, flush=True)


class SlurmCluster:
    """munged + slurmctld (root namespace) + one slurmd per Mininet host. See the module doc."""

    def __init__(self, fabric: "Fabric", workdir: Path, gpus: dict[str, int], *,
                 start_timeout_s: float = 60.0, progress: bool = True,
                 keep_logs: Path | None = None):
        self.fabric = fabric
        self.topology = fabric.topology
        self.workdir = Path(workdir).resolve()
        unknown = sorted(set(gpus) - set(self.topology.host_by_name))
        if unknown:
            raise FabricError(f"Slurm nodes not in topology {self.topology.name}: {', '.join(unknown)}")
        self.gpus = {h.name: int(gpus[h.name]) for h in self.topology.hosts if h.name in gpus}
        self.hosts: list[str] = list(self.gpus)
        self.start_timeout_s = start_timeout_s
        self.progress = progress
        self.keep_logs = Path(keep_logs) if keep_logs else None   # logs copied here on stop()
        self.conf_dir = self.workdir / "etc"
        self.head_ip = head_ip(self.topology)
        self.control_host = subprocess.run(["hostname", "-s"], capture_output=True, text=True,
                                           check=True).stdout.strip()
        self.munge_socket = self.workdir / "munge" / "munge.socket"
        self.env: dict[str, str] = {"SLURM_CONF": str(self.conf_dir / "slurm.conf")}
        self.bringup_s: float = float("nan")
        self.teardown_s: float = float("nan")
        self._munged: subprocess.Popen | None = None
        self._slurmctld: subprocess.Popen | None = None
        self._slurmd: dict[str, subprocess.Popen] = {}
        self._uts: set[str] = set()          # UTS namespaces of our slurmds (and their jobs)
        self._logs: list[Any] = []
        self._head_up = False
        self._started = False
        from mininet_fabric.slurm_accounting import SlurmAccounting
        self.accounting = SlurmAccounting(self.workdir, self.munge_socket, self.control_host,
                                          self._spawn, self._cli)

    # ---- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> "SlurmCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _say(self, text: str) -> None:
        if self.progress:
            _progress(text)

    def start(self) -> None:
        if self._started:
            return
        missing = missing_binaries()
        if missing:
            raise FabricError(f"Slurm is not installed (missing {', '.join(missing)}); "
                              "`make slurm` installs Debian's slurmctld slurmd slurm-client munge")
        if self.fabric.net is None:
            raise FabricError("SlurmCluster needs a fabric that is up")
        self.accounting.check_installed()
        self._started = True
        t0 = time.monotonic()
        try:
            self._write_config()
            self._add_head_node()
            self._start_munged()
            self.accounting.start()       # MariaDB, slurmdbd, associations: before slurmctld
            self.start_slurmctld(clear_state=True)
            for h in self.hosts:
                self.start_slurmd(h)
            self.wait_idle(self.hosts, self.start_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.bringup_s = time.monotonic() - t0
        self._say(f"{len(self.hosts)} nodes idle ({self.bringup_s:.1f} s; "
                  f"slurmctld at {self.head_ip}:{self.ctld_port}, SLURM_CONF={self.env['SLURM_CONF']})")

    def stop(self) -> None:
        """Idempotent: kill every daemon and job process, remove the head port and the state."""
        if not self._started:
            return
        t0 = time.monotonic()
        for h in list(self._slurmd):
            self.kill_slurmd(h)
        self._kill_uts_processes()
        self.kill_slurmctld()
        self.accounting.stop()
        self._kill(self._munged)
        self._munged = None
        self._remove_head_node()
        for f in self._logs:
            f.close()
        self._logs.clear()
        self._uts.clear()
        if self.keep_logs is not None and (self.workdir / "log").is_dir():
            try:
                shutil.copytree(self.workdir / "log", self.keep_logs, dirs_exist_ok=True)
                shutil.copytree(self.conf_dir, self.keep_logs / "etc", dirs_exist_ok=True)
            except OSError as err:
                self._say(f"could not keep the Slurm logs in {self.keep_logs}: {err}")
        shutil.rmtree(self.workdir, ignore_errors=True)
        self._started = False
        self.teardown_s = time.monotonic() - t0
        self._say(f"stopped ({self.teardown_s:.1f} s)")

    # ---- configuration -----------------------------------------------------------------
    def _write_config(self) -> None:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        for d in ("etc", "state", "spool", "run", "log", "munge", "dev"):
            (self.workdir / d).mkdir(parents=True, exist_ok=True)
        # 0755: every user's job steps reach munged's socket (the key file itself is 0600)
        os.chmod(self.workdir / "munge", 0o755)
        dev = self.workdir / "dev"
        for name, k in self.gpus.items():
            (dev / name).mkdir()
            for i in range(k):
                os.mknod(dev / name / f"nvidia{i}", 0o660 | 0o020000, os.makedev(NVIDIA_MAJOR, i))
        self.ctld_port, self.slurmd_port = _free_port(), _free_port()
        nodes = [(h, self.topology.host_by_name[h].ip, self.gpus[h]) for h in self.hosts]
        (self.conf_dir / "slurm.conf").write_text(slurm_conf(
            control_host=self.control_host, control_addr=self.head_ip, ctld_port=self.ctld_port,
            slurmd_port=self.slurmd_port, workdir=self.workdir, munge_socket=self.munge_socket,
            nodes=nodes))
        (self.conf_dir / "gres.conf").write_text(gres_conf(dev, self.gpus))
        (self.conf_dir / "topology.conf").write_text(topology_conf(self.topology, self.hosts))
        self.accounting.configure(self.conf_dir)

    # ---- the head node: the root namespace's port on the fabric -----------------------------
    def _add_head_node(self) -> None:
        tor = self.topology.racks[0].tor
        ip = ["ip", "link", "del", HEAD_INTF]
        subprocess.run(ip, capture_output=True)              # a crashed run's leftover
        cmds = [
            ["ip", "link", "add", HEAD_INTF, "type", "veth", "peer", "name", HEAD_PEER],
            ["sysctl", "-qw", f"net.ipv6.conf.{HEAD_INTF}.disable_ipv6=1",
             f"net.ipv6.conf.{HEAD_PEER}.disable_ipv6=1"],
            ["ovs-vsctl", "--timeout=10", "add-port", tor, HEAD_PEER],
            ["ip", "addr", "add", f"{self.head_ip}/32", "dev", HEAD_INTF],
            ["ip", "link", "set", HEAD_PEER, "up"],
            ["ip", "link", "set", HEAD_INTF, "up"],
        ]
        self._head_up = True
        for cmd in cmds:
            self._run(cmd)
        for intf in (HEAD_INTF, HEAD_PEER):   # TCP stalls on the userspace datapath otherwise
            subprocess.run(["ethtool", "-K", intf, "tx", "off", "rx", "off"], capture_output=True)
        for h in self.hosts:
            self._run(["ip", "route", "replace", f"{self.topology.host_by_name[h].ip}/32",
                       "dev", HEAD_INTF, "src", self.head_ip])
        self._wait_head_reaches(self.hosts, timeout=30.0)

    def _wait_head_reaches(self, hosts: list[str], timeout: float) -> None:
        """Every host answers a ping from the head (the controller has located both ends)."""
        deadline = time.monotonic() + timeout
        pending = list(hosts)
        while pending:
            pending = [h for h in pending if subprocess.run(
                ["ping", "-c1", "-W1", self.topology.host_by_name[h].ip],
                capture_output=True).returncode != 0]
            if pending and time.monotonic() > deadline:
                raise FabricError(f"the Slurm head node ({self.head_ip} on {HEAD_INTF}) cannot "
                                  f"reach {', '.join(pending)} over the fabric; under the sluice "
                                  "controller give it with_head_node(topology)")

    def _remove_head_node(self) -> None:
        if not self._head_up:
            return
        tor = self.topology.racks[0].tor
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-port", tor, HEAD_PEER],
                       capture_output=True)
        subprocess.run(["ip", "link", "del", HEAD_INTF], capture_output=True)
        self._head_up = False

    # ---- daemons -------------------------------------------------------------------------
    def _log(self, name: str):
        f = open(self.workdir / "log" / f"{name}.out", "ab")
        self._logs.append(f)
        return f

    def _spawn(self, cmd: list[str], name: str) -> subprocess.Popen:
        log = self._log(name)
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **self.env}, preexec_fn=_die_with_parent,
                                start_new_session=True)

    def _start_munged(self) -> None:
        m = self.workdir / "munge"
        self._run(["mungekey", "--create", f"--keyfile={m}/munge.key"])
        os.chmod(m / "munge.key", 0o600)
        self._munged = self._spawn(["munged", "-F", "-f", f"--socket={self.munge_socket}",
                                    f"--key-file={m}/munge.key", f"--pid-file={m}/munged.pid",
                                    f"--seed-file={m}/munged.seed",
                                    f"--log-file={self.workdir}/log/munged.log"], "munged")
        self._wait(lambda: self.munge_socket.exists(), 10, "munged", self._munged)

    def start_slurmctld(self, clear_state: bool = False) -> None:
        """Start (or restart) slurmctld; without ``clear_state`` it recovers its jobs from
        StateSaveLocation."""
        if self._slurmctld is not None and self._slurmctld.poll() is None:
            return
        cmd = ["slurmctld", "-D", "-f", self.env["SLURM_CONF"]] + (["-c"] if clear_state else ["-R"])
        self._slurmctld = self._spawn(cmd, "slurmctld")
        self._wait(lambda: self._cli(["scontrol", "ping"]).returncode == 0
                   and "UP" in self._cli(["scontrol", "ping"]).stdout, 20, "slurmctld",
                   self._slurmctld)

    def kill_slurmctld(self) -> None:
        """SIGKILL slurmctld and its helper (slurmscriptd); its state stays for a restart."""
        proc, self._slurmctld = self._slurmctld, None
        if proc is None:
            return
        helpers = _children(proc.pid)
        self._kill(proc)
        for pid in helpers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def start_slurmd(self, host: str) -> None:
        if host not in self.gpus:
            raise KeyError(f"{host} is not a node of this cluster")
        p = self._slurmd.get(host)
        if p is not None and p.poll() is None:
            return
        pid = self.fabric.host(host).pid
        script = f"hostname {host} && exec slurmd -D -N {host} -f {self.env['SLURM_CONF']}"
        proc = self._spawn(["nsenter", f"--net=/proc/{pid}/ns/net", "unshare", "--uts",
                            "sh", "-c", script], f"slurmd-{host}")
        self._slurmd[host] = proc
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:          # remember its UTS namespace (for stop())
            try:
                uts = os.readlink(f"/proc/{proc.pid}/ns/uts")
            except OSError:
                break
            if uts != os.readlink("/proc/self/ns/uts"):
                self._uts.add(uts)
                break
            time.sleep(0.01)

    def kill_slurmd(self, host: str) -> None:
        """SIGKILL the node's slurmd (its running job steps stay, as on a real node)."""
        self._kill(self._slurmd.pop(host, None))

    # ---- node state ----------------------------------------------------------------------
    def drain(self, host: str, reason: str) -> None:
        self._scontrol_update(host, "DRAIN", reason)

    def resume(self, host: str) -> None:
        self._scontrol_update(host, "RESUME", None)

    def _scontrol_update(self, host: str, state: str, reason: str | None) -> None:
        cmd = ["scontrol", "update", f"NodeName={host}", f"State={state}"]
        if reason is not None:
            cmd.append(f"Reason={reason}")
        r = self._cli(cmd)
        if r.returncode != 0:
            raise FabricError(f"{' '.join(cmd)} failed: {(r.stderr or r.stdout).strip()}")

    def node_states(self) -> dict[str, str]:
        """``{node: state}`` as sinfo reports it (``idle``, ``mixed``, ``drained``, ``down*``...)."""
        r = self._cli(["sinfo", "-h", "-N", "-o", "%N %T"])
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1]
        return out

    def wait_idle(self, hosts: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = self.node_states()
            if all(states.get(h) == "idle" for h in hosts):
                return
            if time.monotonic() > deadline:
                jobs = self._cli(["squeue", "-h", "-o", "%i %T %N %j"]).stdout.strip()
                raise FabricError(f"Slurm nodes not idle after {timeout:.0f} s: {states}; "
                                  f"jobs: {jobs or 'none'} (logs in {self.workdir / 'log'})")
            dead = [h for h in hosts if self._slurmd.get(h) is not None
                    and self._slurmd[h].poll() is not None]
            if dead:
                raise FabricError(f"slurmd exited on {', '.join(dead)}: "
                                  f"{self._tail(f'slurmd-{dead[0]}.log')}")
            time.sleep(0.2)

    # ---- helpers -------------------------------------------------------------------------
    def _cli(self, cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **self.env})

    @staticmethod
    def _run(cmd: list[str]) -> None:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise FabricError(f"{' '.join(cmd)} failed: {(r.stderr or r.stdout).strip()}")

    def _tail(self, log: str) -> str:
        for path in (self.workdir / "log" / log, self.workdir / "log" / log.replace(".log", ".out")):
            try:
                return path.read_text(errors="replace")[-1500:]
            except OSError:
                continue
        return "(no log)"

    def _wait(self, ready, timeout: float, what: str, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None:
                raise FabricError(f"{what} exited with {proc.returncode}: {self._tail(what + '.log')}"
                                  f" {self._tail(what + '.out')}")
            if time.monotonic() > deadline:
                raise FabricError(f"{what} not ready after {timeout:.0f} s: {self._tail(what + '.log')}")
            time.sleep(0.1)

    @staticmethod
    def _kill(proc: subprocess.Popen | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def _kill_uts_processes(self) -> None:
        """SIGKILL every process left in one of our slurmds' UTS namespaces: slurmstepd and
        the jobs' processes (they are ours: a slurmd started them)."""
        if not self._uts:
            return
        for _ in range(20):
            found = []
            for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
                try:
                    if os.readlink(f"/proc/{pid}/ns/uts") in self._uts:
                        found.append(pid)
                except OSError:
                    continue
            if not found:
                return
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.1)
