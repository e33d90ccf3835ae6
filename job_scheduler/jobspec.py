"""The job description: one YAML format for the scheduler, the simulator and the launcher.

    jobs:
      - name: resnet-a
        model: resnet18          # a known model, or `layers:` (conv/fc list, eq. 2 and 3)
        dataset_size: 50000      # m, samples
        epochs: 2                # e
        batch_size: 32           # b
        max_gpus: 4
        arrival: 0               # optional, seconds
        num_ps: 1                # optional

(Loading and validation: see ``load_jobs`` / ``parse_jobs`` in this module.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Layer:
    kind: str                 # "conv" or "fc"
    c_in: int
    c_out: int
    k: int = 1                # conv kernel size K
    h: int = 1                # fc input height H
    w: int = 1                # fc input width W


@dataclass(frozen=True)
class JobSpec:
    name: str
    model: str                     # model-table name, or "custom" when `layers` is given
    dataset_size: int              # m
    epochs: int                    # e
    batch_size: int                # b
    max_gpus: int
    arrival: float = 0.0
    num_ps: int = 1
    layers: tuple[Layer, ...] | None = None
    # Trace-driven jobs only: GPU count and duration recorded in the trace, so that a
    # policy that changes the GPU count can rescale the duration through C(n).
    trace_gpus: int | None = None
    trace_duration: float | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
