"""The one loop body: what a slot decides, whichever loop drives it.

``decide_slot(ctx, policy, mechanisms)`` runs, on the loop's ``SchedulingContext``
(job_scheduler/context.py), the mechanisms' and the policy's hooks in one order and
returns the :class:`~job_scheduler.decisions.SlotPlan` they took: the starts and the
suspensions (``ctx.start`` and ``ctx.preempt`` record each into ``ctx.plan``). The
drivers only carry the plan out: the simulator at once (its context applies each step
as it is taken, with the measured costs charged), the scheduler service through its
executor, the end-to-end run by launching and suspending PS jobs.

Order: while jobs wait, the mechanisms' ``before_step`` (time-slicing frees GPUs), the
policy's ``step``, the mechanisms' ``after_step`` (packing); when nothing waits and GPUs
are idle, the policy's ``regrow`` (sluice resizes running jobs).
"""

from __future__ import annotations

from typing import Sequence

from job_scheduler.decisions import SlotPlan


def decide_slot(ctx, policy, mechanisms: Sequence = ()) -> SlotPlan:
    plan = ctx.plan = SlotPlan()
    if ctx.waiting:
        for m in mechanisms:
            m.before_step(ctx, policy)
        policy.step(ctx)
        for m in mechanisms:
            m.after_step(ctx, policy)
    if not ctx.waiting and ctx.state.total_free and ctx.running:
        policy.regrow(ctx)
    return plan
