"""Scheduling policies, Blox-style: admission order, GPU-count decision and placement
are separate pieces, composed per policy, and every policy runs in the same simulator
(:mod:`job_scheduler.simulator`) through the same placement code
(:mod:`job_scheduler.placement`), so comparisons are apples to apples.

One module per policy (``fifo``, ``single``, ``random``, ``tetris``, ``lyapunov``,
``las``, ``sluice``), each behind the ``Policy`` protocol of :mod:`.base` (what the
simulator, the scheduler service and the end-to-end run call), and one list of them in
:mod:`.registry` (name -> factory and description) that ``make_policy``, the command
line and the docs read. Policy modules import only :mod:`.base`, never each other.

========  ===================  =====================================  ==============
name      admission            GPU count                              placement
========  ===================  =====================================  ==============
lyapunov  FIFO head-of-line    Proteus drift-plus-penalty (proteus)   Liquid best fit
                                                                      (+ group GA for a
                                                                      slot's batch)
single    FIFO head-of-line    1                                      Liquid best fit
random    FIFO head-of-line    uniform in [1, max_gpus], seeded       Liquid best fit
fifo      FIFO head-of-line    requested (trace_gpus or max_gpus)     first fit
tetris    packing (backfill)   requested                              Tetris cosine
las       2D-LAS priority      requested (fixed), preemptive          first fit
sluice    shortest predicted   drift-plus-penalty argmin, the queue's Liquid best fit
          remaining work,      GPU time priced (sluice.py)
          preemptive at a cost
========  ===================  =====================================  ==============
"""

from job_scheduler.policies.base import (PLACEMENTS, FixedCountPolicy, Policy, PolicyOptions,
                                         make_placement, requested_gpus)
from job_scheduler.policies.las import DEFAULT_LAS_THRESHOLDS, LasPolicy
from job_scheduler.policies.lyapunov import (DEFAULT_EPS, DEFAULT_K, DEFAULT_V, HISTORY,
                                             LyapunovPolicy)
from job_scheduler.policies.registry import (NON_PREEMPTIVE, POLICY_NAMES, REGISTRY,
                                             PolicyEntry, make_policy, parse_policy_names,
                                             policy_table)
from job_scheduler.policies.sluice import SluicePolicy

__all__ = ["DEFAULT_EPS", "DEFAULT_K", "DEFAULT_LAS_THRESHOLDS", "DEFAULT_V", "HISTORY",
           "NON_PREEMPTIVE", "PLACEMENTS", "POLICY_NAMES", "REGISTRY", "FixedCountPolicy",
           "LasPolicy", "LyapunovPolicy", "Policy", "PolicyEntry", "PolicyOptions",
           "SluicePolicy", "make_placement", "make_policy", "parse_policy_names",
           "policy_table", "requested_gpus"]
