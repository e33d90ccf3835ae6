"""The four arms of ``sluice demo`` (issue 47): one workload, four ways to run it. Each
arm's scheduler options live here and only here, so that an arm can be switched to
another scheduler (e.g. arm d to a priority-priced ``sluice`` policy) in one line.

- **a** "as a Slurm cluster runs them today": FIFO head of line, each job at the GPU
  count it asks for, the nodes Slurm's cons_tres + topology/tree would choose (a model
  of Slurm's choice: ``job_scheduler/core/slurm_placement.py``, checked against a real
  slurmctld by ``tests/fabric/slurm/test_slurm_placement.py``), a FIFO network;
- **b** the same order and placement, sluice's flow priority on (the controller's rule);
- **c** sluice's scheduler (Proteus drift-plus-penalty count + Liquid placement), a FIFO
  network;
- **d** sluice's scheduler and sluice's flow priority.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice_common.errors import option_error


@dataclass(frozen=True)
class Arm:
    key: str
    title: str
    policy: str                 # job_scheduler.core.policies name
    placement: str | None       # the policy's placement swapped for this one (None: its own)
    priority: bool              # the controller's flow priority (by the --rank rule)

    def make_policy(self, seed: int = 0):
        from job_scheduler.core.policies import make_policy

        return make_policy(self.policy, seed=seed, placement=self.placement)


ARMS: dict[str, Arm] = {a.key: a for a in (
    Arm("a", "Slurm today: FIFO, requested GPUs, Slurm's nodes, FIFO network", "fifo", "slurm", False),
    Arm("b", "Slurm's order and nodes, sluice's priority", "fifo", "slurm", True),
    Arm("c", "sluice's scheduler, FIFO network", "lyapunov", None, False),
    Arm("d", "sluice's scheduler and priority", "lyapunov", None, True),
)}
ALL_ARMS = ",".join(ARMS)


def parse_arms(text: str) -> list[Arm]:
    """``"a,d"`` -> those arms in a..d order; an unknown or empty one -> InputError on
    the ``arms`` field (the CLI names its flag, exit 2)."""
    keys = [k.strip().lower() for k in str(text).split(",")]
    if not keys or any(not k for k in keys):
        raise option_error("arms", f"empty arm in {text!r} (known: {ALL_ARMS})")
    unknown = [k for k in keys if k not in ARMS]
    if unknown:
        raise option_error("arms", f"unknown arm(s) {', '.join(map(repr, unknown))} in "
                                   f"{text!r} (known: {ALL_ARMS})")
    return [ARMS[k] for k in ARMS if k in keys]
