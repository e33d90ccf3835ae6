"""A real systemd, as PID 1 of its own namespaces, to run the repository's unit files.

This machine (and CI) runs in a container whose PID 1 is not systemd. Debian's systemd
binary can still be the system manager of a PID namespace of its own: ``unshare --pid
--fork --mount --cgroup`` gives it PID 1, a private mount table and a cgroup namespace
rooted in a fresh cgroup v2 directory, and the setup script below gives it a private
/run, /proc, /sys/fs/cgroup, /var/lib and an overlay on /etc (the sysusers user, the
environment files and the unit files go there, so nothing on the host changes). The
network namespace is the host's: the services listen on loopback ports the test reaches.

The unit files are installed unchanged into /etc/systemd/system; /opt/sluice (their
ExecStart prefix) is the checkout's virtual environment, bind-mounted. Only three things
are added: empty stand-ins for the boot targets the units order against
(sysinit.target, network-online.target, ...: the manager boots only ``sluice.target``,
nothing of the host's), and a drop-in per service that appends its output to a log file
(there is no journald) and names the checkout's sources, bind-mounted at /opt/sluice-src,
in PYTHONPATH, and the venv's ``sluice`` script is replaced by a copy whose interpreter
is /opt/sluice/bin/python: the venv's editable install and its scripts name the
checkout's own path, which may be under a home directory that the units' ProtectHome
hides (CI clones anywhere).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

SYSTEMD = Path("/lib/systemd/systemd")
CGROUP2_ROOT = Path("/sys/fs/cgroup/unified")   # hybrid hosts; on pure v2: /sys/fs/cgroup
STUB_TARGETS = ("sysinit.target", "basic.target", "sockets.target", "timers.target",
                "paths.target", "slices.target", "shutdown.target", "network.target",
                "network-online.target", "multi-user.target", "local-fs.target")

SETUP = """set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run
mount -t proc proc /proc
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs tmpfs {work}/ovl
mkdir -p {work}/ovl/up {work}/ovl/work
mount -t overlay overlay -o lowerdir=/etc,upperdir={work}/ovl/up,workdir={work}/ovl/work /etc
mount -t tmpfs tmpfs /var/lib
mount -t tmpfs tmpfs /opt
mkdir /opt/sluice /opt/sluice-src
mount --bind {venv} /opt/sluice
mount --bind {repo} /opt/sluice-src
mount --bind {work}/sluice-entry /opt/sluice/bin/sluice
systemd-sysusers {sysusers}
mkdir -p /etc/sluice /etc/systemd/system
cp {work}/etc-sluice/* /etc/sluice/
chmod 0600 /etc/sluice/*.env
cp {units} /etc/systemd/system/
export container=sluice-test SYSTEMD_UNIT_PATH=/etc/systemd/system:{work}/stubs
exec {systemd} --system --unit=sluice.target
"""


def cgroup2_root() -> Path:
    """Where this host mounts cgroup v2 (hybrid: /sys/fs/cgroup/unified)."""
    if (CGROUP2_ROOT / "cgroup.procs").exists():
        return CGROUP2_ROOT
    return Path("/sys/fs/cgroup")


def write_stubs(stubs: Path, services: list[str], logs: Path) -> None:
    """The boot targets as empty units, ``sluice.target`` (the manager's only goal) and a
    log drop-in per service."""
    stubs.mkdir(parents=True, exist_ok=True)
    for name in STUB_TARGETS:
        (stubs / name).write_text("[Unit]\nDescription=stand-in for the boot target\n")
    (stubs / "sluice.target").write_text("[Unit]\nDescription=the sandbox's goal\n")
    for service in services:
        drop = stubs / f"{service}.d"
        drop.mkdir(exist_ok=True)
        (drop / "log.conf").write_text(
            f"[Service]\nStandardOutput=append:{logs / (service + '.log')}\n"
            "StandardError=inherit\nEnvironment=PYTHONPATH=/opt/sluice-src\n")


class SystemdSandbox:
    """``start()`` boots the manager with ``units`` installed and ``env_files`` (name ->
    text) in /etc/sluice; ``systemctl(...)`` talks to it; ``close()`` ends it (the kernel
    ends every process of its PID namespace with it)."""

    def __init__(self, work: Path, units: list[Path], sysusers: Path, venv: Path,
                 env_files: dict[str, str], repo: Path):
        self.work, self.units, self.sysusers, self.venv = work, units, sysusers, venv
        self.repo = repo
        self.env_files = env_files
        self.logs = work / "logs"
        self.proc: subprocess.Popen | None = None
        self.cgroup = cgroup2_root() / f"sluice-systemd-test-{os.getpid()}"

    def _prepare(self) -> Path:
        (self.work / "ovl").mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        etc = self.work / "etc-sluice"
        etc.mkdir(exist_ok=True)
        for name, text in self.env_files.items():
            (etc / name).write_text(text)
        write_stubs(self.work / "stubs", [u.name for u in self.units], self.logs)
        entry = (self.venv / "bin" / "sluice").read_text().split("\n", 1)[1]
        (self.work / "sluice-entry").write_text("#!/opt/sluice/bin/python\n" + entry)
        (self.work / "sluice-entry").chmod(0o755)
        script = self.work / "setup.sh"
        script.write_text(SETUP.format(
            work=self.work, venv=self.venv, repo=self.repo, sysusers=self.sysusers,
            systemd=SYSTEMD,
            units=" ".join(str(u) for u in self.units)))
        return script

    def start(self, timeout_s: float = 30.0) -> None:
        script = self._prepare()
        self.cgroup.mkdir(exist_ok=True)

        def enter_cgroup() -> None:          # in the child, before unshare: its own cgroup
            (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))

        with open(self.work / "sandbox.log", "ab") as out:
            self.proc = subprocess.Popen(
                ["unshare", "--pid", "--fork", "--mount", "--cgroup", "sh", str(script)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, preexec_fn=enter_cgroup)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the sandbox's systemd exited: "
                                   + (self.work / "sandbox.log").read_text()[-2000:])
            if self.manager_pid() and self.systemctl("is-system-running").stdout.strip() in (
                    "running", "degraded"):
                return
            time.sleep(0.2)
        raise RuntimeError("the sandbox's systemd did not come up in "
                           f"{timeout_s:.0f} s: {(self.work / 'sandbox.log').read_text()[-2000:]}")

    def manager_pid(self) -> int | None:
        """The host's pid of the sandbox's PID 1 (the child of ``unshare --fork``)."""
        if self.proc is None:
            return None
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            pids = children.read_text().split()
        except OSError:
            return None
        return int(pids[0]) if pids else None

    def systemctl(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        return subprocess.run(["nsenter", "-t", str(self.manager_pid()), "-m", "-p",
                               "systemctl", "--no-pager", *args], capture_output=True,
                              text=True, timeout=30, check=check)

    def show(self, unit: str, prop: str) -> str:
        return self.systemctl("show", "-p", prop, "--value", unit, check=True).stdout.strip()

    def log(self, unit: str) -> str:
        path = self.logs / f"{unit}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        pid = self.manager_pid()
        if pid is not None:
            # stopped services remove their private /tmp directories (on the host's /tmp)
            self.systemctl("stop", *(u.name for u in self.units))
            os.kill(pid, signal.SIGKILL)      # PID 1 of the namespace: all go with it
        if self.proc is not None:
            self.proc.wait(timeout=30)
        # the manager's cgroups, deepest first (empty once their processes are gone)
        if self.cgroup.exists():
            for path in sorted((p for p in self.cgroup.rglob("*") if p.is_dir()),
                               key=lambda p: len(p.parts), reverse=True):
                _rmdir_retry(path)
            _rmdir_retry(self.cgroup)
        shutil.rmtree(self.work / "ovl", ignore_errors=True)


def _rmdir_retry(path: Path, tries: int = 50) -> None:
    for _ in range(tries):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)                  # processes still leaving the cgroup
