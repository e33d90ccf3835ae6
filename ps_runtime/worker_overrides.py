"""What one job's workers (or every job's: ``"*"``) do differently from a run's defaults:
a typed, frozen set of :class:`~ps_runtime.launcher.WorkerOptions` fields, None where the
default stands. A run (``end_to_end.runloop.RunOptions.worker_overrides``) keeps one per
job name and lays them over the options it builds for each launch."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from ps_runtime.launcher import WorkerOptions


@dataclass(frozen=True)
class WorkerOverrides:
    input_size: int | None = None
    num_classes: int | None = None
    lr: float | None = None
    bucket_mb: float | None = None
    overlap: bool | None = None
    compress: str | None = None
    seed: int | None = None
    device: str | None = None
    threads: int | None = None
    compute: str | None = None           # torch | emulated | auto
    profile: str | None = None
    bw_scale: float | None = None
    compute_s: float | None = None       # emulated: seconds per batch
    bytes_per_batch: int | None = None   # emulated: wire bytes per batch
    pipeline_keys: int | None = None     # emulated: keys in flight per batch

    def set_fields(self) -> dict[str, Any]:
        """The fields this overrides (those not None)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}

    def over(self, base: "WorkerOverrides") -> "WorkerOverrides":
        """``base`` with this one's set fields laid over it (a job's over ``"*"``)."""
        return replace(base, **self.set_fields())

    def apply(self, options: WorkerOptions) -> WorkerOptions:
        return replace(options, **self.set_fields())

    def to_json(self) -> dict[str, Any]:
        return self.set_fields()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WorkerOverrides":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"worker overrides: unknown field(s) {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
        return cls(**data)


def overrides_for(table: Mapping[str, WorkerOverrides], job: str) -> WorkerOverrides:
    """A job's overrides: its own over every job's (``"*"``)."""
    return table.get(job, WorkerOverrides()).over(table.get("*", WorkerOverrides()))
