"""Accounting for the local Slurm cluster: a MariaDB server and slurmdbd of its own, so
that ``sacct`` is the record of finished jobs and accounts/QOS are enforced
(``AccountingStorageEnforce=associations``), as on a real site; the GPUs are accounted
(``AccountingStorageTRES=gres/gpu``: sacct's AllocTRES names ``gres/gpu=N``, the GPU count
a site's history gives ``sluice simulate --trace-format sacct``).

Everything lives under the cluster's work directory and dies with it: MariaDB gets its
own data directory (``mariadb-install-db``), socket and a free TCP port on 127.0.0.1
(never the machine's ``/run/mysqld``), slurmdbd its own ``slurmdbd.conf`` next to
``slurm.conf`` and a free port. Both run in the foreground as children of the process
that starts the cluster (parent-death signal). Start order: database, slurmdbd, the
cluster/accounts/users (``sacctmgr -i``), and only then slurmctld, which must find its
cluster and the associations at start.

The associations (:data:`ASSOCIATIONS`): root may charge every account (the tests'
site-policy jobs), ``sluice-alice`` only ``physics`` and ``sluice-bob`` only ``chem``: the
Unix users ``make slurm`` creates, whose jobs the tests and ``sluice demo --executor
slurm`` submit on their behalf.
"""

from __future__ import annotations

import pwd
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Mapping

from mininet_fabric.lock import FabricError

DATABASE = "slurm_acct_db"
DB_USER = "slurm"
CLUSTER = "sluice"
ACCOUNTS = ("sluice", "physics", "chem")
# Unix user -> the accounts it may charge (the first: its default)
ASSOCIATIONS: dict[str, tuple[str, ...]] = {
    "root": ACCOUNTS,
    "sluice-alice": ("physics",),
    "sluice-bob": ("chem",),
}
BINARIES = ("mariadb-install-db", "mariadbd", "mariadb", "slurmdbd", "sacctmgr", "sacct")


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]


def missing_users(associations: Mapping[str, tuple[str, ...]] = ASSOCIATIONS) -> list[str]:
    out = []
    for user in associations:
        try:
            pwd.getpwnam(user)
        except KeyError:
            out.append(user)
    return out


# ---- configuration text (pure) ----------------------------------------------------------

def slurmdbd_conf(*, dbd_host: str, dbd_port: int, db_port: int, password: str,
                  workdir: Path, munge_socket: Path) -> str:
    w = workdir
    return "\n".join([
        "# Written by sluice (mininet_fabric/slurm_accounting.py): the test cluster's slurmdbd.",
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}",
        f"DbdHost={dbd_host}",
        "DbdAddr=127.0.0.1",
        f"DbdPort={dbd_port}",
        "SlurmUser=root",
        f"PidFile={w}/run/slurmdbd.pid",
        f"LogFile={w}/log/slurmdbd.log",
        "DebugLevel=info",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={db_port}",
        f"StorageUser={DB_USER}",
        f"StoragePass={password}",
        f"StorageLoc={DATABASE}",
    ]) + "\n"


def with_accounting(slurm_conf: str, dbd_port: int, munge_socket: Path) -> str:
    """slurm.conf with slurmdbd accounting (associations enforced) instead of none."""
    out = []
    for line in slurm_conf.splitlines():
        if line.startswith("AccountingStorageType="):
            out += ["AccountingStorageType=accounting_storage/slurmdbd",
                    "AccountingStorageHost=127.0.0.1", f"AccountingStoragePort={dbd_port}",
                    # with munge, the "password" to slurmdbd is munged's socket (AuthInfo
                    # does not reach the slurmdbd connection)
                    f"AccountingStoragePass={munge_socket}",
                    # a job must charge an account its user has an association with
                    "AccountingStorageEnforce=associations,qos",
                    # GPUs in the record (sacct's AllocTRES gres/gpu=N), as a GPU site
                    # keeps them: Slurm's default TRES leave GRES out
                    "AccountingStorageTRES=gres/gpu"]
        elif line.startswith("# No slurmdbd"):
            out.append("# slurmdbd (MariaDB) keeps the accounting: sacct; also a text file.")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def sacctmgr_commands(associations: Mapping[str, tuple[str, ...]] = ASSOCIATIONS
                      ) -> list[list[str]]:
    accounts = sorted({a for accts in associations.values() for a in accts})
    cmds = [["sacctmgr", "-i", "add", "cluster", CLUSTER],
            ["sacctmgr", "-i", "add", "account", ",".join(accounts), f"Cluster={CLUSTER}",
             "Description=sluice test account", "Organization=sluice"]]
    for user, accts in associations.items():
        cmds.append(["sacctmgr", "-i", "add", "user", user, f"Account={','.join(accts)}",
                     f"DefaultAccount={accts[0]}", f"Cluster={CLUSTER}"])
    return cmds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the daemons ------------------------------------------------------------------------

class SlurmAccounting:
    """MariaDB + slurmdbd of one :class:`~mininet_fabric.slurm_cluster.SlurmCluster`.

    ``spawn(cmd, name)`` starts a foreground daemon logging to ``log/<name>.out`` (the
    cluster's); ``cli(cmd)`` runs a Slurm command with the cluster's ``SLURM_CONF``."""

    def __init__(self, workdir: Path, munge_socket: Path, dbd_host: str,
                 spawn: Callable[[list[str], str], subprocess.Popen],
                 cli: Callable[[list[str]], subprocess.CompletedProcess],
                 associations: Mapping[str, tuple[str, ...]] = ASSOCIATIONS,
                 timeout_s: float = 30.0):
        self.workdir = Path(workdir)
        self.munge_socket = munge_socket
        self.dbd_host = dbd_host
        self._spawn, self._cli = spawn, cli
        self.associations = dict(associations)
        self.timeout_s = timeout_s
        self.db_dir = self.workdir / "mariadb"
        self.db_socket = self.db_dir / "mariadb.sock"
        self.db_port = self.dbd_port = 0
        self._password = secrets.token_hex(12)
        self._mariadb: subprocess.Popen | None = None
        self._slurmdbd: subprocess.Popen | None = None
        self._install: subprocess.Popen | None = None

    def check_installed(self) -> None:
        missing = missing_binaries()
        if missing:
            raise FabricError(f"Slurm accounting is not installed (missing {', '.join(missing)});"
                              " `make slurm` installs Debian's slurmdbd and mariadb-server")
        users = missing_users(self.associations)
        if users:
            raise FabricError(f"Unix user(s) {', '.join(users)} missing; `make slurm` creates them")

    def configure(self, conf_dir: Path) -> None:
        """Write slurmdbd.conf (mode 600: it holds the database password) and switch
        slurm.conf to slurmdbd accounting."""
        self.db_port, self.dbd_port = _free_port(), _free_port()
        dbd = conf_dir / "slurmdbd.conf"
        dbd.write_text(slurmdbd_conf(dbd_host=self.dbd_host, dbd_port=self.dbd_port,
                                     db_port=self.db_port, password=self._password,
                                     workdir=self.workdir, munge_socket=self.munge_socket))
        dbd.chmod(0o600)
        conf = conf_dir / "slurm.conf"
        conf.write_text(with_accounting(conf.read_text(), self.dbd_port, self.munge_socket))
        # the database's files (~7 s on 2 cores) are made while the cluster sets up the
        # rest (head node, munged); start() waits for them
        self.db_dir.mkdir(parents=True, exist_ok=True)
        self._install = subprocess.Popen(
            ["mariadb-install-db", "--no-defaults", f"--datadir={self.db_dir / 'data'}",
             "--user=root", "--auth-root-authentication-method=normal", "--skip-test-db"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True)

    def start(self) -> None:
        """Database, slurmdbd, associations; FabricError naming the step and its log."""
        self._start_mariadb()
        self._slurmdbd = self._spawn(["slurmdbd", "-D"], "slurmdbd")
        self._register()

    def stop(self) -> None:
        for proc in (self._slurmdbd, self._mariadb, self._install):
            if proc is not None and proc.poll() is None:
                proc.kill()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        self._slurmdbd = self._mariadb = self._install = None

    # ---- steps ---------------------------------------------------------------------
    def _start_mariadb(self) -> None:
        data = self.db_dir / "data"
        if self._install is None:
            raise FabricError("SlurmAccounting.start() before configure()")
        try:
            out, _ = self._install.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            raise FabricError("mariadb-install-db took over 120 s")
        if self._install.returncode != 0:
            raise FabricError(f"mariadb-install-db failed ({self._install.returncode}): "
                              f"{(out or '')[-1500:]}")
        self._mariadb = self._spawn([
            "mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={self.db_socket}",
            f"--port={self.db_port}", "--bind-address=127.0.0.1", "--user=root",
            f"--pid-file={self.db_dir}/mariadb.pid", f"--log-error={self.workdir}/log/mariadb.log",
            "--skip-name-resolve", "--innodb-buffer-pool-size=16M"], "mariadb")
        sql = (f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{self._password}'; "
               f"GRANT ALL ON {DATABASE}.* TO '{DB_USER}'@'127.0.0.1';")
        self._until(lambda: subprocess.run(
            ["mariadb", "--no-defaults", "-S", str(self.db_socket), "-u", "root", "-e", sql],
            capture_output=True, timeout=30).returncode == 0 if self.db_socket.exists() else False,
            "MariaDB", self._mariadb, "mariadb.log")

    def _register(self) -> None:
        """The cluster, accounts and users, once slurmdbd answers (the first command is
        retried until it does)."""
        cmds = sacctmgr_commands(self.associations)
        last: list[str] = [""]

        def first() -> bool:
            r = self._cli(cmds[0])
            last[0] = (r.stderr or r.stdout).strip()
            return r.returncode == 0
        self._until(first, "slurmdbd", self._slurmdbd, "slurmdbd.log", last)
        for cmd in cmds[1:]:
            r = self._cli(cmd)
            if r.returncode != 0:
                raise FabricError(f"{' '.join(cmd)} failed: {(r.stderr or r.stdout).strip()}")

    def _until(self, ready: Callable[[], bool], what: str, proc: subprocess.Popen | None,
               log: str, last: list[str] | None = None) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not ready():
            tail = self._tail(log)
            if proc is not None and proc.poll() is not None:
                raise FabricError(f"{what} exited with {proc.returncode}: {tail}")
            if time.monotonic() > deadline:
                said = f" (last answer: {last[0]})" if last and last[0] else ""
                raise FabricError(f"{what} not ready after {self.timeout_s:.0f} s{said}: {tail}")
            time.sleep(0.2)

    def _tail(self, log: str) -> str:
        for name in (log, log.replace(".log", ".out")):
            try:
                return (self.workdir / "log" / name).read_text(errors="replace")[-1500:]
            except OSError:
                continue
        return "(no log)"
