"""PS port blocks held per host by an executor's running jobs (Slurm's; the local
executor's, all on one host).

Each job's ps-lite scheduler, servers and workers listen on a block of ports
(:mod:`ps_runtime.plan`); two jobs sharing a host must not share a block, whatever their
names. The book hands each new job a block free on every host it runs on
(:func:`ps_runtime.plan.reserve_base_port`, below the ephemeral range) and learns the
blocks of jobs it did not start itself (a restarted service) from their run
directory's ``plan.json``, which records ``base_port`` and ``decided_hosts``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from job_scheduler.service.run_files import read_json
from job_scheduler.service.store import JobRecord
from ps_runtime.plan import default_base_port, reserve_base_port
from ps_runtime.slurm_plan import PLAN_FILE


class PortBook:
    def __init__(self) -> None:
        self._held: dict[int, tuple[int, frozenset[str]]] = {}   # job id -> (base, hosts)

    def taken(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for base, hosts in self._held.values():
            for h in hosts:
                out.setdefault(h, []).append(base)
        return out

    def reserve(self, job_id: int, job_name: str, hosts: Iterable[str]) -> int:
        """A block for job ``job_id`` on ``hosts`` (ValueError when none is free)."""
        hosts = frozenset(hosts)
        self._held.pop(job_id, None)
        base = reserve_base_port(hosts, self.taken(), default_base_port(job_name))
        self._held[job_id] = (base, hosts)
        return base

    def hold(self, job_id: int, base: int, hosts: Iterable[str]) -> None:
        """Job ``job_id`` holds ``base`` on ``hosts`` (learned after a restart)."""
        self._held[job_id] = (base, frozenset(hosts))

    def release(self, job_id: int) -> None:
        self._held.pop(job_id, None)

    def holds(self, job_id: int) -> bool:
        return job_id in self._held

    def block_of(self, job_id: int) -> int | None:
        """The base of the block job ``job_id`` holds (None: none)."""
        held = self._held.get(job_id)
        return held[0] if held else None

    def sync(self, running: Sequence[JobRecord], kind: str = "slurm") -> None:
        """Forget the blocks of jobs no longer running; learn those of running jobs of
        ``kind`` it has not seen (from their plan.json)."""
        ids = {j.id for j in running if j.executor == kind}
        for job_id in set(self._held) - ids:
            del self._held[job_id]
        for job in running:
            if job.id in ids and job.id not in self._held and job.run_dir:
                plan = read_json(Path(job.run_dir) / PLAN_FILE) or {}
                if isinstance(plan.get("base_port"), int):
                    self._held[job.id] = (plan["base_port"],
                                          frozenset(plan.get("decided_hosts") or ()))
