"""Site policy: what a site asks of every batch job (account, QOS, time limit, node
features, GPU type, CPUs and memory per GPU, further ``sbatch`` flags), set by the
scheduler's administrator and, field by field, overridden by a job's ``slurm:`` block.

Pure: :class:`SiteOptions` checks its values (ValueError naming the field) and turns
itself into the ``sbatch`` flags of one heterogeneous-job component
(:meth:`SiteOptions.component_flags`). Slurm propagates ``--account``, ``--qos`` and
``--time`` from one component to the next but not ``--partition``, ``--constraint``,
``--gres`` or the per-GPU flags, so every component is given all of them: the flags
then mean the same whatever Slurm propagates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from slurm_client.gres import gres_request

# Slurm's time formats (sbatch --time): M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or no limit.
_TIME = re.compile(r"\d+(:\d{1,2}){0,2}|\d+-\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE",
                   re.IGNORECASE)
_MEMORY = re.compile(r"\d+[KMGT]?", re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
# a node-feature expression: features joined by & | , with [] () * and counts
_CONSTRAINT = re.compile(r"[A-Za-z0-9_.\-&|,\[\]()*:]+")
# flags sluice sets itself (one job per decision, on the decided nodes): a pass-through
# flag may not change them
RESERVED_FLAGS = frozenset({
    "--job-name", "-J", "--output", "-o", "--error", "-e", "--nodelist", "-w", "--nodes",
    "-N", "--ntasks", "-n", "--gres", "--gpus", "-G", "--parsable", "--no-requeue",
    "--requeue", "--export", "--wrap", "--exclude", "-x", "--partition", "-p", "--account",
    "-A", "--qos", "-q", "--time", "-t", "--constraint", "-C", "--cpus-per-gpu",
    "--mem-per-gpu", "--uid", "--gid", "--chdir", "-D", "--hold", "-H", "--array", "-a",
    "--het-group", "--wait", "-W"})
# fields a job's `slurm:` block may set (not the pass-through: that is the site's)
JOB_FIELDS = ("account", "qos", "time", "partition", "constraint", "gpu_type",
              "cpus_per_gpu", "mem_per_gpu")


@dataclass(frozen=True)
class SiteOptions:
    account: str | None = None
    qos: str | None = None
    time: str | None = None            # Slurm's format: 30, 1:00:00, 2-00:00:00
    partition: str | None = None
    constraint: str | None = None      # node features: a100&ib, [rack1|rack2]
    gpu_type: str | None = None        # GPUs requested (and counted) as gpu:TYPE:N
    cpus_per_gpu: int | None = None
    mem_per_gpu: str | None = None     # 16G, 16000 (MB)
    sbatch_flags: tuple[str, ...] = () # further flags, each one argv word: --reservation=x

    def __post_init__(self):
        problems = site_problems(vars(self))
        if problems:
            raise ValueError("; ".join(problems))

    def overridden(self, job: Mapping[str, Any] | None) -> "SiteOptions":
        """These options with a job's ``slurm:`` fields in their place."""
        given = {k: v for k, v in (job or {}).items() if v is not None}
        unknown = sorted(set(given) - set(JOB_FIELDS))
        if unknown:
            raise ValueError(f"slurm: unknown field(s) {', '.join(unknown)} (known: "
                             f"{', '.join(JOB_FIELDS)})")
        return replace(self, **given)

    def component_flags(self, gpus: int) -> list[str]:
        """The flags of one heterogeneous-job component holding ``gpus`` GPUs."""
        argv = [f"--{name}={value}" for name, value in (
            ("partition", self.partition), ("account", self.account), ("qos", self.qos),
            ("time", self.time), ("constraint", self.constraint)) if value]
        if gpus:
            argv.append(f"--gres={gres_request(gpus, self.gpu_type)}")
            if self.cpus_per_gpu:
                argv.append(f"--cpus-per-gpu={self.cpus_per_gpu}")
            if self.mem_per_gpu:
                argv.append(f"--mem-per-gpu={self.mem_per_gpu}")
        return argv + list(self.sbatch_flags)

    def describe(self) -> str:
        shown = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                 if getattr(self, f.name) not in (None, ())]
        return ", ".join(shown) or "none"


def _flag_name(word: str) -> str:
    return word.split("=", 1)[0] if word.startswith("--") else word[:2]


def site_problems(values: Mapping[str, Any]) -> list[str]:
    """Every bad value of SiteOptions' ``values`` (field -> value), each as ``field: reason``."""
    out = []
    checks = [("account", _NAME, "letters, digits, _ . -"), ("qos", _NAME, "letters, digits, _ . -"),
              ("partition", _NAME, "letters, digits, _ . -"),
              ("gpu_type", _NAME, "letters, digits, _ . -"),
              ("constraint", _CONSTRAINT, "node features joined by & | , [ ] ( ) *"),
              ("time", _TIME, "Slurm's time format: MINUTES, H:MM:SS, D-HH:MM:SS or "
               "UNLIMITED"), ("mem_per_gpu", _MEMORY, "a size like 16G or 16000 (MB)")]
    for name, pattern, rule in checks:
        value = values.get(name)
        if value is not None and (not isinstance(value, str) or not pattern.fullmatch(value)):
            out.append(f"{name}: {value!r} is not {rule}")
    cpus = values.get("cpus_per_gpu")
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int)
                             or not 1 <= cpus <= 4096):
        out.append(f"cpus_per_gpu: must be a whole number 1..4096, got {cpus!r}")
    for word in values.get("sbatch_flags") or ():
        if not isinstance(word, str) or not word.startswith("-") or any(
                c.isspace() or not c.isprintable() for c in word):
            out.append(f"sbatch_flags: {word!r} is not one sbatch flag (--name or --name=value, "
                       "no spaces)")
        elif _flag_name(word) in RESERVED_FLAGS:
            out.append(f"sbatch_flags: {_flag_name(word)} is sluice's to set (the decided "
                       "nodes, the job's name and output, a --slurm-* option, or who runs "
                       "the job); a pass-through flag may not change it")
    return out
