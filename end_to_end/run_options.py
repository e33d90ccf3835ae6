"""How ``sluice run`` (``end_to_end.runloop.RealTimeRun``) runs its jobs: the options
its command line and the experiments build once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ps_runtime.plan import PORT_LOW
from ps_runtime.worker_overrides import WorkerOverrides


@dataclass
class RunOptions:
    priority: bool = True
    slot_s: float = 1.0
    batches: int | None = None       # per worker; None: epochs * dataset / (batch * n)
    input_size: int = 64
    job_timeout_s: float = 900.0
    port_base: int = PORT_LOW
    compute: str = "torch"           # torch | emulated (ps_runtime.compute)
    profile: str | None = None       # device profile of the estimator and emulated workers
    compute_info: dict = field(default_factory=dict)   # {compute, device, profile}: reports
    # Per job name: WorkerOptions fields to override (e.g. emulated compute_s and
    # bytes_per_batch of a synthetic job mix); "*" applies to every job.
    worker_overrides: Mapping[str, WorkerOverrides] = field(default_factory=dict)
