"""What a preemption and a migration cost, measured, and a simulator that charges it.

The costs (suspend seconds, resume-to-first-batch seconds) per model and worker count
are measured by ``bench/ps_runtime/bench_suspend.py`` on real PS jobs and stored in
``job_scheduler/core/data/preemption_costs.yaml``. :class:`PreemptionCosts` answers for any
job: the measured row of its model at the nearest worker count; for a model not
measured, a straight-line fit of the measured emulated rows at that worker count against
the model's parameter bytes (the checkpoint and the first exchange grow with them).

The simulator (``Simulator(costs=...)``) charges every suspension ``suspend_s +
resume_s`` of the job at its GPU count (paid as seconds without progress when it starts
again, GPUs held: the simulator frees a suspended job's GPUs at once, so the suspend part
is charged to the job, not to the one that takes its GPUs, a stated simplification), or
nothing (:class:`ZeroCosts`); a job resumed on another count pays that count's resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from sluice_common.models import MODELS, BYTES_PER_PARAM
from sluice_common.errors import InputError

COSTS_PATH = Path(__file__).resolve().parent / "data" / "preemption_costs.yaml"
COST_MODES = ("measured", "zero")


@dataclass(frozen=True)
class CostRow:
    model: str
    compute: str
    workers: int
    suspend_s: float
    resume_s: float


class PreemptionCosts:
    def __init__(self, rows: list[CostRow]):
        if not rows:
            raise ValueError("no preemption cost rows")
        self.rows = rows
        self._memo: dict[tuple[str, int], float] = {}

    @classmethod
    def load(cls, path: str | Path = COSTS_PATH) -> "PreemptionCosts":
        path = Path(path)
        try:
            doc = yaml.safe_load(path.read_text())
            rows = [CostRow(str(r["model"]), str(r["compute"]), int(r["workers"]),
                            float(r["suspend_s"]), float(r["resume_s"])) for r in doc["costs"]]
        except OSError as err:
            raise InputError(str(path), f"cannot read: {err.strerror or err}")
        except (yaml.YAMLError, KeyError, TypeError, ValueError) as err:
            raise InputError(str(path), f"not a preemption cost table: {err}", field="costs")
        return cls(rows)

    def suspend_resume(self, model: str, gpus: int) -> tuple[float, float]:
        # The emulated rows stand for a GPU job (Cost_bat of the profile, the model's
        # bytes); the torch rows measure this machine's CPU. Fall back to all rows.
        rows = [r for r in self.rows if r.compute == "emulated"] or self.rows
        counts = sorted({r.workers for r in rows})
        w = min(counts, key=lambda c: (abs(c - gpus), c))
        at = [r for r in rows if r.workers == w]
        for r in at:
            if r.model == model:
                return r.suspend_s, r.resume_s
        sizes = np.array([MODELS[r.model].params * BYTES_PER_PARAM for r in at if r.model in MODELS])
        known = [r for r in at if r.model in MODELS]
        if model not in MODELS or len(known) < 2:
            return (float(np.median([r.suspend_s for r in at])),
                    float(np.median([r.resume_s for r in at])))
        x = MODELS[model].params * BYTES_PER_PARAM
        out = []
        for key in ("suspend_s", "resume_s"):
            y = np.array([getattr(r, key) for r in known])
            slope, icpt = np.polyfit(sizes, y, 1)
            out.append(max(float(icpt + slope * x), float(y.min()) * 0.5))
        return out[0], out[1]

    def total(self, model: str, gpus: int) -> float:
        key = (model, gpus)
        v = self._memo.get(key)
        if v is None:
            v = self._memo[key] = sum(self.suspend_resume(model, gpus))
        return v


class ZeroCosts:
    """No charge for any suspension (``zero``): the cost table of an ideal runtime."""

    def suspend_resume(self, model: str, gpus: int) -> tuple[float, float]:
        return 0.0, 0.0

    def total(self, model: str, gpus: int) -> float:
        return 0.0


def load_costs(mode: str | None):
    """``measured`` -> the table; ``zero`` -> :class:`ZeroCosts`; None -> None (each
    suspension costs what its asker says)."""
    if mode is None:
        return None
    if mode not in COST_MODES:
        raise ValueError(f"costs: must be one of {', '.join(COST_MODES)}, got {mode!r}")
    return PreemptionCosts.load() if mode == "measured" else ZeroCosts()
