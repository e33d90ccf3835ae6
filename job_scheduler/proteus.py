"""The Proteus decision: Lyapunov drift-plus-penalty over the GPU count (pure functions).

Names follow the paper and DESIGN.md:

- ``Q``: the task queue, in seconds of single-GPU work (sum of Cost_j(1) waiting).
- ``Z``: the delay-tolerant virtual queue (seconds); it grows by ``eps`` every slot the
  queue is non-empty and nothing (enough) is served, so a waiting job eventually goes.
- ``V``: the penalty weight (seconds). Larger V weighs the job's completion time C(n)
  more against the backlog: jobs wait longer for a better (bigger) allocation — lower
  average C, larger average Q (Neely's O(1/V), O(V) trade-off).
- ``eps``: Z's growth per slot (seconds); how impatient the scheduler is.
- ``k``: the GPU count n chosen for the head job i. ``k * Cost_i(1)`` is the work served
  in that slot. Reading k as n (not as "one job") is what makes the decision a
  trade-off: the ``(k*Cost_i(1))^2`` term penalises big allocations, ``-k*Cost_i(1)*(Z+Q)``
  rewards serving a lot when the backlog is large, and ``V*C(n)`` rewards a short job.
  With k fixed at 1 the first two terms would not depend on n and every job would take
  all the GPUs it may.

Per slot t (what a simulator does):
    n = decide(costs, cost1, Q, Z, V, free_gpus, max_gpus)     # 0 = wait
    served = served_work(n, cost1)
    Z = update_Z(Z, Q, eps, served)                            # uses Q(t)
    Q = update_Q(Q, served, arrivals, waiting)                 # arrivals: Cost_j(1) list
``LyapunovState.advance`` does the last two lines and records the history.

One deviation, needed for liveness: with k = n a served job removes n * Cost_i(1) from Q,
n times the work it added, so Q can fall to 0 while other jobs still wait. Then
1[Q=0] halves Z every slot, S(n) = V*C(n) + (n*Cost_i(1))^2 > 0 at Q = Z = 0, and once
arrivals stop the waiting jobs starve forever (measured: in a 60-job slotted run with
V >= 100 most jobs never started). ``update_Q`` therefore takes ``waiting``, the
Cost_j(1) sum of the jobs still queued, and floors Q at it:
``Q(t+1) = max(Q(t) - k*Cost_i(1), waiting) + arrivals``. When nothing waits this is the
paper's formula; when jobs wait, Q >= their work, so Q = 0 means "queue empty" as the
Z update assumes. Pass ``waiting=0`` for the paper's formula unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping


def served_work(n: int, cost1: float) -> float:
    """k * Cost_i(1) with k = n, the GPU count given to the head job (0 when it waits)."""
    return n * cost1


def update_Q(Q: float, served: float, arrivals: Iterable[float] = (),
             waiting: float = 0.0) -> float:
    """Q(t+1) = max(Q(t) - k*Cost_i(1), waiting) + sum over arrivals of Cost_j(1).

    ``waiting`` (default 0, the paper's formula) is the sum of Cost_j(1) of the jobs
    still queued after this slot's decision. With k = n a served job removes n times its
    own work, so Q can reach 0 while other jobs wait; Z then halves every slot and a
    waiting job starves once arrivals stop (S(n) > 0 forever at Q = Z = 0). Flooring Q
    at the real backlog keeps 1[Q=0] meaning "nothing waits"; see the module docstring."""
    return max(Q - served, waiting, 0.0) + sum(arrivals)


def update_Z(Z: float, Q: float, eps: float, served: float) -> float:
    """Z(t+1) = max(Z(t) + 1[Q>0]*(eps - k*Cost_i(1)) - 1[Q=0]*Z(t)/2, 0).

    ``Q`` is Q(t), the backlog the slot started with."""
    if Q > 0:
        return max(Z + eps - served, 0.0)
    return max(Z - Z / 2.0, 0.0)


def S(n: int, C_n: float, served_work: float, Q: float, Z: float, V: float) -> float:
    """S(n) = V*C(n) + (k*Cost_i(1))^2 - k*Cost_i(1)*(Z+Q); S(0) = 0 (wait)."""
    if n == 0:
        return 0.0
    return V * C_n + served_work ** 2 - served_work * (Z + Q)


def decide(costs: Mapping[int, float], cost1: float, Q: float, Z: float, V: float,
           free_gpus: int, max_gpus: int) -> int:
    """The GPU count for the head job, or 0 to wait a slot.

    ``costs``: {n: C(n)} (missing n are not candidates). Candidates are
    1 <= n <= min(max_gpus, free_gpus). The n minimising S(n) is chosen (ties: fewer
    GPUs) and scheduled only when S(n) < 0 = S(0); otherwise the job waits."""
    best_n, best_s = 0, 0.0
    for n in range(1, min(max_gpus, free_gpus) + 1):
        if n not in costs:
            continue
        s = S(n, costs[n], served_work(n, cost1), Q, Z, V)
        if s < best_s:
            best_n, best_s = n, s
    return best_n


@dataclass
class LyapunovState:
    """Q and Z across slots, with their history for plots."""
    eps: float
    Q: float = 0.0
    Z: float = 0.0
    t: float = 0.0
    history: list[tuple[float, float, float]] = field(default_factory=list)  # (t, Q, Z)

    def advance(self, served: float, arrivals: Iterable[float] = (), waiting: float = 0.0,
                dt: float = 1.0) -> None:
        """Close one slot: Z first (it reads Q(t)), then Q; record (t, Q, Z) of the new slot.
        ``waiting``: Cost_j(1) sum of the jobs still queued (see ``update_Q``)."""
        if not self.history:
            self.history.append((self.t, self.Q, self.Z))
        self.Z = update_Z(self.Z, self.Q, self.eps, served)
        self.Q = update_Q(self.Q, served, arrivals, waiting)
        self.t += dt
        self.history.append((self.t, self.Q, self.Z))

    def arrive(self, arrivals: Iterable[float]) -> None:
        """Add work to Q outside a slot boundary (e.g. jobs present at t = 0)."""
        self.Q += sum(arrivals)

    def decide(self, costs: Mapping[int, float], cost1: float, V: float, free_gpus: int,
               max_gpus: int) -> int:
        return decide(costs, cost1, self.Q, self.Z, V, free_gpus, max_gpus)
