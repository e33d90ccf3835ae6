"""Thin, typed wrappers around Slurm's command-line tools (22.05 to 24.11; pyslurm has no
build for 22.05). Every call runs one command with a timeout and parses its output with
the pure functions of :mod:`slurm_client.parse`. :meth:`SlurmClient.version` reads the
release once (``sinfo --version``) and refuses one whose JSON sluice cannot read
(:class:`~slurm_client.versions.UnsupportedSlurm`, naming it).

- :class:`SlurmUnavailable`: the command is missing, timed out, or could not reach
  slurmctld ("Unable to contact slurm controller"); it names the command.
- :class:`SlurmCommandError`: slurmctld answered no (an ``sbatch`` rejection: "Batch
  job submission failed: Invalid node name specified"); ``message`` is Slurm's own text.

``env`` is added to the environment of every command (``SLURM_CONF`` for a cluster that
is not the machine's default).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Iterable, Mapping

from slurm_client.parse import (JobInfo, SQUEUE_FORMAT, Submission, SwitchInfo,
                                parse_sbatch_parsable, parse_scontrol_jobs, parse_squeue_lines,
                                parse_topology, sbatch_argv)
from slurm_client.nodes import NodeInfo, parse_sinfo_json
from slurm_client.versions import SlurmVersion, layout_for, parse_version_text, sinfo_argv

# Slurm's words for "could not talk to slurmctld" (as opposed to "slurmctld said no").
_UNREACHABLE = ("Unable to contact slurm controller", "Socket timed out", " is DOWN",
                "Communication connection failure", "Zero Bytes were transmitted",
                "Connection refused", "Unable to establish", "Invalid authentication credential",
                "Munge", "munge")


class SlurmError(RuntimeError):
    def __init__(self, command: str, message: str):
        self.command = command
        self.message = message.strip()
        shown = command if len(command) <= 120 else command[:117] + "..."
        super().__init__(f"`{shown}`: {self.message}")


class SlurmUnavailable(SlurmError):
    """Slurm could not be reached (or its tools are not installed)."""


class SlurmCommandError(SlurmError):
    """Slurm answered with an error (e.g. an sbatch rejection)."""


class SlurmClient:
    def __init__(self, env: Mapping[str, str] | None = None, timeout: float = 20.0):
        self.env = dict(env or {})
        self.timeout = timeout
        self._version: SlurmVersion | None = None

    def environment(self, extra: Mapping[str, str] | None = None,
                    unset: Iterable[str] = ()) -> dict[str, str]:
        env = {**os.environ, **self.env, **(extra or {})}
        for name in unset:
            env.pop(name, None)
        return env

    def run(self, argv: list[str], *, env: Mapping[str, str] | None = None,
            unset: Iterable[str] = ()) -> str:
        command = " ".join(shlex.quote(a) for a in argv)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout,
                                  env=self.environment(env, unset), stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise SlurmUnavailable(command, f"{argv[0]} is not installed (Slurm's client "
                                   "tools: apt-get install slurm-client)")
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(command, f"no answer within {self.timeout:g} s")
        if proc.returncode != 0:
            text = (proc.stderr.strip() or proc.stdout.strip()
                    or f"exit status {proc.returncode}")
            cls = SlurmUnavailable if any(w in text for w in _UNREACHABLE) else SlurmCommandError
            raise cls(command, text)
        return proc.stdout

    # ---- reads -------------------------------------------------------------------------
    def ping(self) -> str:
        """``scontrol ping``: exits 0 with "... is UP" (a DOWN controller exits 1)."""
        out = self.run(["scontrol", "ping"])
        if "UP" not in out:
            raise SlurmUnavailable("scontrol ping", out.strip() or "slurmctld is not up")
        return out.strip()

    def version(self) -> SlurmVersion:
        """The client tools' release (``sinfo --version``: ``slurm 22.05.8``), read once;
        UnsupportedSlurm (a ValueError) for a release whose JSON layout sluice does not
        know, naming it."""
        if self._version is None:
            text = self.run(["sinfo", "--version"])
            try:
                version = parse_version_text(text)
            except ValueError as err:
                raise SlurmCommandError("sinfo --version", str(err))
            layout_for(version)
            self._version = version
        return self._version

    def nodes(self) -> list[NodeInfo]:
        """Every node (``sinfo --json`` in the layout of :meth:`version`'s release)."""
        return parse_sinfo_json(self.run(sinfo_argv(self.version())))

    def topology(self) -> list[SwitchInfo]:
        return parse_topology(self.run(["scontrol", "show", "topology"]))

    def jobs(self, ids: Iterable[int] = (), name: str | None = None) -> list[JobInfo]:
        """Jobs (every part of a heterogeneous one) by id or name, any state Slurm still
        remembers (``MinJobAge``). ``squeue -o``, not ``--json``: 22.05's JSON ignores -j."""
        argv = ["squeue", "--noheader", "--states=all", f"--format={SQUEUE_FORMAT}"]
        ids = sorted(set(ids))
        if ids:
            argv.append("--jobs=" + ",".join(map(str, ids)))
        if name:
            argv.append(f"--name={name}")
        if not ids and not name:
            raise ValueError("jobs(): give ids or a name")
        try:
            return parse_squeue_lines(self.run(argv))
        except SlurmCommandError as err:
            if "Invalid job id" in err.message:      # every id already purged
                return []
            raise

    def accounted(self, ids: Iterable[int]) -> list[JobInfo]:
        """What Slurm's accounting (``sacct``, slurmdbd) recorded for these jobs, one
        command for all of them: every part, with exit code, user and account; [] for
        none asked. A cluster without accounting answers an error (SlurmCommandError)."""
        from slurm_client.sacct import parse_sacct_lines, sacct_argv

        ids = sorted(set(ids))
        return parse_sacct_lines(self.run(sacct_argv(ids))) if ids else []

    def job(self, job_id: int) -> list[JobInfo]:
        """``scontrol show job -o ID`` (exit code, reason); [] once Slurm forgot it."""
        try:
            return parse_scontrol_jobs(self.run(["scontrol", "show", "job", "-o", str(job_id)]))
        except SlurmCommandError as err:
            if "Invalid job id" in err.message:
                return []
            raise

    def job_gpu_indices(self) -> dict[int, dict[str, list[int]]]:
        """The GPU indices Slurm gave every job that holds GPUs now, any user's:
        ``{job id: {node: [index, ...]}}`` (:mod:`slurm_client.gres_indices`)."""
        from slurm_client.gres_indices import parse_job_gpu_indices

        try:
            return parse_job_gpu_indices(self.run(["scontrol", "-d", "show", "job", "-o"]))
        except SlurmCommandError as err:
            if "No jobs in the system" in err.message:
                return {}
            raise

    # ---- changes -----------------------------------------------------------------------
    def submit(self, sub: Submission, env: Mapping[str, str] | None = None,
               unset: Iterable[str] = ()) -> int:
        """``sbatch --parsable``; the job gets ``env`` on top of the caller's environment
        less ``unset`` (sbatch's default --export=ALL). Returns the job id (the leader's,
        for a heterogeneous job)."""
        return parse_sbatch_parsable(self.run(sbatch_argv(sub), env=env, unset=unset))

    def cancel(self, job_id: int, signal: str | None = None) -> None:
        self.run(["scancel", *( [f"--signal={signal}"] if signal else []), str(job_id)])

    def requeue(self, job_id: int) -> None:
        self.run(["scontrol", "requeue", str(job_id)])

    def suspend(self, job_id: int) -> None:
        self.run(["scontrol", "suspend", str(job_id)])

    def resume(self, job_id: int) -> None:
        self.run(["scontrol", "resume", str(job_id)])

    def drain(self, node: str, reason: str) -> None:
        self.run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"])

    def resume_node(self, node: str) -> None:
        self.run(["scontrol", "update", f"nodename={node}", "state=resume"])
