"""The four arms of ``sluice demo``: one workload, four ways to run it. Each
arm's scheduler options live here and only here, so that an arm can be switched to
another scheduler (e.g. arm d to a priority-priced ``sluice`` policy) in one line.

- **a** "as a Slurm cluster runs them today": FIFO head of line, each job at the GPU
  count it asks for, the nodes Slurm's cons_tres + topology/tree would choose (a model
  of Slurm's choice: ``job_scheduler/core/slurm_placement.py``, checked against a real
  slurmctld by ``tests/fabric/slurm/test_slurm_placement.py``), a FIFO network;
- **b** the same order and placement, sluice's flow priority on (the controller's rule);
- **c** sluice's scheduler (Proteus drift-plus-penalty count + Liquid placement), a FIFO
  network;
- **d** sluice's scheduler (the ``sluice`` policy) pricing each candidate placement's
  bandwidth with the fabric's rule (``price_priority``: the share of the class the
  controller's rule would give the job, ``job_scheduler.core.priority_pricing``), and
  sluice's flow priority by that same rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice_common.errors import option_error
from sluice_common.rank_rules import DEFAULT_RULE


@dataclass(frozen=True)
class Arm:
    key: str
    title: str
    policy: str                 # job_scheduler.core.policies name
    placement: str | None       # the policy's placement swapped for this one (None: its own)
    priority: bool              # the controller's flow priority (by the --rank rule)
    prices_priority: bool = False   # the policy prices placements with the controller's rule

    def price_rule(self, rank: str) -> str | None:
        """The ``price_priority`` of this arm's policy when the controller ranks by
        ``rank`` (None: the fair share)."""
        return rank if self.prices_priority else None

    def make_policy(self, rank: str = DEFAULT_RULE, seed: int = 0):
        from job_scheduler.core.policies import make_policy

        return make_policy(self.policy, seed=seed, placement=self.placement,
                           price_priority=self.price_rule(rank))


ARMS: dict[str, Arm] = {a.key: a for a in (
    Arm("a", "Slurm today: FIFO, requested GPUs, Slurm's nodes, FIFO network", "fifo", "slurm", False),
    Arm("b", "Slurm's order and nodes, sluice's priority", "fifo", "slurm", True),
    Arm("c", "sluice's scheduler, FIFO network", "lyapunov", None, False),
    Arm("d", "sluice's scheduler priced with the fabric's rule, and priority", "sluice",
        None, True, prices_priority=True),
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
