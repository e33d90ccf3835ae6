"""Submitting a job as the user who asked for it (``sluice scheduler --users``).

The service runs as root and submits with ``sbatch --uid=USER --gid=GROUP`` (Slurm
22.05 accepts them from root only; measured: the job runs as that uid, and slurmdbd
charges it to the user's default account, or the ``--account`` given, which must be one
of the user's associations). The job's run directory is the user's (chowned before the
submission: the batch script, srun's output and the PS processes write there), and its
environment says who it is (``HOME``, ``USER``, ``LOGNAME``; sbatch would otherwise pass
root's). What the user's processes must read — the repository, the Python environment,
the run directories' root — must be reachable by that user, on every node at the same
path: :func:`unreachable` checks it at start (as the user, with ``runuser``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from job_scheduler.service.users import UnixUser
from sluice_common.errors import option_error


def own_run_dir(user: UnixUser, run_dir: Path) -> None:
    """``run_dir`` and everything in it belong to ``user``."""
    for root, dirs, files in os.walk(run_dir):
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), user.uid, user.gid, follow_symlinks=False)
    os.chown(run_dir, user.uid, user.gid)


def identity(user: UnixUser) -> tuple[tuple[str, ...], dict[str, str]]:
    """sbatch's flags (before the first component) and the job's environment."""
    return ((f"--uid={user.name}", f"--gid={user.group}"),
            {"HOME": user.home, "USER": user.name, "LOGNAME": user.name})


def unreachable(user: str, readable: list[Path], enterable: list[Path]) -> list[str]:
    """What ``user`` cannot read (files) or enter (directories): each as a phrase."""
    out = []
    for path, test in [*((p, "-r") for p in readable), *((p, "-x") for p in enterable)]:
        r = subprocess.run(["runuser", "-u", user, "--", "test", test, str(path)],
                           capture_output=True, timeout=30)
        if r.returncode != 0:
            out.append(f"user {user} cannot {'read' if test == '-r' else 'enter'} {path} "
                       "(every directory above it needs o+x)")
    return out


def submit_as(name: str, run_dir: Path) -> tuple[tuple[str, ...], dict[str, str]]:
    """For a job of user ``name``: its run directory made the user's; sbatch's flags
    and the job's environment (KeyError: no such Unix user: the job fails to launch)."""
    user = UnixUser.of(name)
    own_run_dir(user, run_dir)
    return identity(user)


def check_users(users, repo: Path, python: Path, run_root: Path) -> None:
    """At start: every mapped user reaches what its jobs run (an option error on
    ``users``, exit 2, naming the user and the path)."""
    for user in users:
        problems = unreachable(user, [repo / "ps_runtime" / "slurm_job.py"], [python, run_root])
        if problems:
            raise option_error("users", "; ".join(problems))
