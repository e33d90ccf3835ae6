"""What a preemption and a migration cost, measured, and a simulator that charges it.

The costs (suspend seconds, resume-to-first-batch seconds) per model and worker count
are measured by ``bench/ps_runtime/bench_suspend.py`` on real PS jobs and stored in
``job_scheduler/data/preemption_costs.yaml``. :class:`PreemptionCosts` answers for any
job: the measured row of its model at the nearest worker count; for a model not
measured, a straight-line fit of the measured emulated rows at that worker count against
the model's parameter bytes (the checkpoint and the first exchange grow with them).

:class:`CostedSimulator` is the trace simulator with

- every preemption charged ``suspend_s + resume_s`` of the job at its GPU count (paid as
  seconds without progress when it starts again, GPUs held: the simulator frees a
  preempted job's GPUs at once, so the suspend part is charged to the job, not to the
  one that takes its GPUs — a stated simplification), or nothing (``zero``);
- optional migration (Gandiva's introspective migration): each slot, a running job
  whose placement spans racks moves to a one-rack best-fit placement of the free GPUs
  when its predicted remaining time there plus the migration cost beats staying.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from job_scheduler.estimator import BYTES_PER_PARAM
from sluice_common.models import MODELS
from job_scheduler.placement import BestFitPlacement
from job_scheduler.simulator import Simulator
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
    def __init__(self, rows: list[CostRow], source: str = ""):
        if not rows:
            raise ValueError("no preemption cost rows")
        self.rows = rows
        self.source = source
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
        return cls(rows, str(doc.get("source", "")))

    def _emulated(self) -> list[CostRow]:
        # The emulated rows stand for a GPU job (Cost_bat of the profile, the model's
        # bytes); the torch rows measure this machine's CPU. Fall back to all rows.
        return [r for r in self.rows if r.compute == "emulated"] or self.rows

    def suspend_resume(self, model: str, gpus: int) -> tuple[float, float]:
        rows = self._emulated()
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


def load_costs(mode: str, path: str | Path | None = None) -> PreemptionCosts | None:
    """``measured`` -> the table; ``zero`` -> None (no charge)."""
    if mode not in COST_MODES:
        raise InputError("argument --preemption-cost", f"must be one of {', '.join(COST_MODES)}, got {mode!r}")
    return PreemptionCosts.load(path or COSTS_PATH) if mode == "measured" else None


class CostedSimulator(Simulator):
    """The simulator with measured (or zero) preemption costs, optional migration, and
    counts of both."""

    def __init__(self, *args, costs: PreemptionCosts | None = None, migrate: bool = False,
                 **kw):
        super().__init__(*args, **kw)
        self.costs = costs
        self.migrate_enabled = migrate
        self.migrations = 0
        self.charged_s = 0.0            # seconds of suspend/resume charged in all
        self._placer = BestFitPlacement()

    def cost_of(self, j: int, gpus: int) -> float:
        return self.costs.total(self.jobs[j].model, gpus) if self.costs else 0.0

    def start(self, j: int, placement) -> None:
        prev, n = self.ran_gpus[j], placement.gpus
        if self.costs and prev and n != prev and self.restart_overhead[j] > 0:
            # resumed on another GPU count (grow/shrink): the resume part is that count's
            model = self.jobs[j].model
            delta = self.costs.suspend_resume(model, n)[1] - self.costs.suspend_resume(model, prev)[1]
            self.restart_overhead[j] = max(self.restart_overhead[j] + delta, 0.0)
            self.charged_s += delta
        super().start(j, placement)

    def preempt(self, j: int, overhead_s: float = 0.0) -> None:
        cost = self.cost_of(j, self.running[j].n)
        self.charged_s += cost
        super().preempt(j, cost)

    # ---- migration --------------------------------------------------------------------
    def _complete(self, j: int, t: float) -> None:
        super()._complete(j, t)
        if self.migrate_enabled:     # GPUs just freed: a rack may have room for a job now
            self.consider_migrations()

    def racks_of(self, placement) -> int:
        st = self.state
        return len({st.rack_of[st.index[h]] for h in (*placement.ps_hosts, *placement.worker_hosts)})

    def consider_migrations(self) -> list[int]:
        moved = []
        for j, run in list(self.running.items()):
            if self.racks_of(run.placement) < 2 or self.state.total_free < run.n:
                continue
            target = self._placer.place(self.state, self.jobs[j].name, run.n,
                                        len(run.placement.ps_hosts))
            if target is None or self.racks_of(target) > 1:
                continue
            left = self.remaining(j)
            stay = left * self.models[j].C(run.n, run.bw)
            move = left * self.models[j].C(run.n, self.live_bandwidth(target)) + self.cost_of(j, run.n)
            if move < stay:
                self.migrate(j, target)
                moved.append(j)
        return moved

    def migrate(self, j: int, target) -> None:
        """Suspend job j here and resume it on ``target`` (its progress kept, the
        migration cost paid as seconds without progress)."""
        cost = self.cost_of(j, self.running[j].n)
        self.charged_s += cost
        Simulator.preempt(self, j, cost)
        self.preemptions -= 1                  # counted as a migration, not a preemption
        self.migrations += 1
        self.start(j, target)

