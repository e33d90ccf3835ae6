"""Scheduling policies, Blox-style: admission order, GPU-count decision and placement
are separate pieces, composed per policy, and every policy runs in the same simulator
(:mod:`job_scheduler.simulation.simulator`) through the same placement code
(:mod:`job_scheduler.core.placement`), so comparisons are apples to apples.

One module per policy (``fifo``, ``single``, ``random``, ``tetris``, ``lyapunov``,
``las``, ``sluice``), each behind the ``Policy`` protocol of :mod:`.base` (what the
simulator, the scheduler service and the end-to-end run call), and one list of them in
:mod:`.registry` (name -> factory and description) that ``make_policy``, the command
line and the docs read. Policy modules import only :mod:`.base`, never each other.

The table of policies (admission, GPU count, placement) is ``registry.REGISTRY``'s
descriptions: ``sluice simulate --help`` prints it and docs/design.md shows it.
"""

from job_scheduler.core.policies.base import FunctionPolicy, Policy, requested_gpus
from job_scheduler.core.policies.las import DEFAULT_LAS_THRESHOLDS
from job_scheduler.core.policies.lyapunov import DEFAULT_EPS, DEFAULT_K, DEFAULT_V, LyapunovPolicy
from job_scheduler.core.policies.registry import (NON_PREEMPTIVE, POLICY_NAMES, PRICES_PRIORITY,
                                                  REGISTRY, check_price_priority, make_policy,
                                                  parse_policy_names, policy_table)

__all__ = ["DEFAULT_EPS", "DEFAULT_K", "DEFAULT_LAS_THRESHOLDS", "DEFAULT_V", "NON_PREEMPTIVE",
           "POLICY_NAMES", "PRICES_PRIORITY", "REGISTRY", "FunctionPolicy", "LyapunovPolicy",
           "Policy", "check_price_priority", "make_policy",
           "parse_policy_names", "policy_table", "requested_gpus"]
