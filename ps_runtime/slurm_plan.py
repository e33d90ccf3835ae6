"""What the Slurm executor tells a job's batch script: ``RUN_DIR/plan.json``, and the
names of every file the two sides share in the run directory.

The executor (``job_scheduler/service/slurm_executor.py``) writes the plan at launch;
the batch script (``python -m ps_runtime.slurm_job RUN_DIR/plan.json``) reads it, and a
restarted service reads it back for the port block it holds
(``job_scheduler/service/slurm_ports.py``). One type, one set of names: a field or a
file renamed here is renamed for all of them.

The JSON keeps the field names and shapes of the untyped plan it replaces (hosts as
``[name, ip]`` pairs), so run directories written before still read."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

PLAN_FILE = "plan.json"              # the executor writes it, the batch script reads it
EXIT_FILE = "exit_status"            # the batch script's exit status (written last)
ERROR_FILE = "error"                 # why the batch script failed, when it did
STARTED_FILE = "batch.started"       # O_EXCL: a second start of the batch script waits
RAN_ON_DIR = "ran_on"                # one record per process: where it really ran
RESULT_FILE = "result.json"          # the finished job's elapsed time and batches
PS_LOG_DIR = "ps"                    # the job's process logs (worker<N>.log, ...)
SUSPENDED_FILE = "suspended.json"    # a checkpointed stop: the checkpoint, where it stopped
CHECKPOINT_DIR = "ps/checkpoint"     # the job's checkpoints, under the run directory


@dataclass(frozen=True)
class SlurmPlan:
    """One launch of one sluice job as a heterogeneous Slurm job."""
    run_dir: str
    job: str                                  # the job's name in ``job_yaml``
    job_yaml: str                             # the job's spec, as a jobs file
    servers: tuple[tuple[str, str], ...]      # (host, ip) of each PS process
    workers: tuple[tuple[str, str], ...]      # (host, ip) of each worker
    groups: Mapping[str, int]                 # host -> heterogeneous component index
    batches: int                              # per worker
    compute: str | None = None                # None: each worker decides (auto)
    compute_s: float | None = None
    bytes_per_batch: int | None = None
    bw_scale: float = 1.0
    profile: str | None = None
    timeout: float | None = None              # seconds; None: an hour
    decided_hosts: tuple[str, ...] = ()       # every host of the decision, sorted
    base_port: int | None = None              # the block reserved on those hosts
    resume_from: str | None = None            # a suspended run's checkpoint to start from
    extra: Mapping[str, Any] = field(default_factory=dict)   # fields this type does not name

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "extra"}
        if self.resume_from is None:      # a first start: the plan as before suspends existed
            del out["resume_from"]
        out.update(servers=[list(p) for p in self.servers],
                   workers=[list(p) for p in self.workers],
                   groups=dict(self.groups), decided_hosts=list(self.decided_hosts))
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SlurmPlan":
        names = {f for f in cls.__dataclass_fields__ if f != "extra"}
        known = {k: v for k, v in data.items() if k in names}
        known.update(servers=tuple((h, ip) for h, ip in data.get("servers") or ()),
                     workers=tuple((h, ip) for h, ip in data.get("workers") or ()),
                     groups=dict(data.get("groups") or {}),
                     decided_hosts=tuple(data.get("decided_hosts") or ()))
        if known.get("bw_scale") is None:
            known.pop("bw_scale", None)
        return cls(**known, extra={k: v for k, v in data.items() if k not in names})

    def write(self, run_dir: Path | None = None) -> Path:
        path = Path(run_dir or self.run_dir) / PLAN_FILE
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path

    @classmethod
    def read(cls, path: Path) -> "SlurmPlan":
        """``path``: a plan file, or the run directory that holds one."""
        path = Path(path)
        return cls.from_json(json.loads((path / PLAN_FILE if path.is_dir() else path).read_text()))
