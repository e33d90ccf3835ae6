"""The Proteus decision: Lyapunov drift-plus-penalty over the GPU count (pure functions).

Names follow the paper and docs/design.md:

- ``Q``: the task queue, in seconds of single-GPU work (sum of Cost_j(1) waiting).
- ``Z``: the delay-tolerant virtual queue (seconds); it grows by ``eps`` every slot the
  queue is non-empty and nothing (enough) is served, so a waiting job eventually goes.
- ``V``: the penalty weight (seconds). Larger V weighs the job's completion time C(n)
  more against the backlog: jobs wait longer for a better (bigger) allocation — lower
  average C, larger average Q (Neely's O(1/V), O(V) trade-off).
- ``eps``: Z's growth per slot (seconds); how impatient the scheduler is.
- ``k``: how many times ``Cost_i(1)`` a decision serves. Two readings are implemented
  (``K_READINGS``; the simulator's default is ``"job"``, policies.DEFAULT_K):

  * ``"job"``: k = 1[n > 0] — one job leaves the queue. Evidence it is the paper's
    meaning: (1) the Q update ``Q - k*Cost_i(1) + sum_arrivals Cost_j(1)`` then keeps Q
    *exactly* the Cost(1) sum of the waiting jobs (each job adds its Cost_j(1) once and
    removes it once), so the paper's formula needs no liveness fix; (2) S(0) = 0 is the
    formula at k = 0; (3) docs/design.md writes k, not n, inside S(n). The two k-terms are then
    the same for every n > 0, so the chosen count is argmin C(n) (network-aware through
    C(n)) and V, eps, Q, Z decide *when* the head job starts.
  * ``"gpus"``: k = n. The (n*Cost_i(1))^2 term penalises big allocations and
    -n*Cost_i(1)*(Z+Q) rewards them, whether or not they are faster: once Z+Q is large
    an allocation that crosses hosts wins although it is slower than one host's GPUs
    (measured on the four Proteus scenarios: 8-19 % of starts ran at a count up to 72x
    slower than the best one free; bench/results/proteus-gap.md), and the paper's Q
    update starves jobs (below).

The pure functions below default to k = n ("gpus", the reading they were written and
hand-tested with); callers pass ``k`` explicitly (LyapunovPolicy does).

Per slot t (what a simulator does):
    n = decide(costs, cost1, Q, Z, V, free_gpus, max_gpus, k)  # 0 = wait
    served = served_work(n, cost1, k)
    Z = update_Z(Z, Q, eps, served)                            # uses Q(t)
    Q = update_Q(Q, served, arrivals, waiting)                 # arrivals: Cost_j(1) list

One deviation, needed for liveness under k = n only: a served job removes n * Cost_i(1) from Q,
n times the work it added, so Q can fall to 0 while other jobs still wait. Then
1[Q=0] halves Z every slot, S(n) = V*C(n) + (n*Cost_i(1))^2 > 0 at Q = Z = 0, and once
arrivals stop the waiting jobs starve forever (measured: in a 60-job slotted run with
V >= 100 most jobs never started). ``update_Q`` therefore takes ``waiting``, the
Cost_j(1) sum of the jobs still queued, and floors Q at it:
``Q(t+1) = max(Q(t) - k*Cost_i(1), waiting) + arrivals``. When nothing waits this is the
paper's formula; when jobs wait, Q >= their work, so Q = 0 means "queue empty" as the
Z update assumes. Pass ``waiting=0`` for the paper's formula unchanged. With k = 1 per
job the floor is never active (Q is the waiting work already).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping


K_READINGS = ("job", "gpus")


def candidate_counts(limit: int) -> list[int]:
    """GPU counts to evaluate for one decision: every n up to 32, then multiples of 4
    (a host's worth); keeps a 128-GPU decision at 56 placements instead of 128."""
    return [n for n in range(1, limit + 1) if n <= 32 or n % 4 == 0 or n == limit]


def served_work(n: int, cost1: float, k: str = "gpus") -> float:
    """k * Cost_i(1) for the head job given n GPUs (0 when it waits, n = 0).

    ``k="job"``: k = 1[n > 0], one job leaves the queue, so its Cost_i(1) is served —
    the reading under which the paper's Q update keeps Q equal to the waiting work
    (see the module docstring). ``k="gpus"``: k = n, the GPU count."""
    if k == "job":
        return cost1 if n > 0 else 0.0
    if k == "gpus":
        return n * cost1
    raise ValueError(f"unknown reading of k {k!r} (known: {', '.join(K_READINGS)})")


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
           free_gpus: int, max_gpus: int, k: str = "gpus") -> int:
    """The GPU count for the head job, or 0 to wait a slot.

    ``costs``: {n: C(n)} (missing n are not candidates). Candidates are
    1 <= n <= min(max_gpus, free_gpus). The n minimising S(n) is chosen (ties: fewer
    GPUs) and scheduled only when S(n) < 0 = S(0); otherwise the job waits.
    ``k``: the reading of k (``served_work``). With ``k="job"`` the two k-terms do not
    depend on n, so the chosen n is argmin C(n) (network-aware through C) and the
    queues decide only *when* it starts."""
    best_n, best_s = 0, 0.0
    for n in range(1, min(max_gpus, free_gpus) + 1):
        if n not in costs:
            continue
        s = S(n, costs[n], served_work(n, cost1, k), Q, Z, V)
        if s < best_s:
            best_n, best_s = n, s
    return best_n


@dataclass
class LyapunovState:
    """Q and Z across slots, the one copy of the queues: LyapunovPolicy keeps its Q
    and Z here."""
    eps: float
    Q: float = 0.0
    Z: float = 0.0

    def serve(self, served: float, leaving: float, first: bool = True) -> None:
        """A job starts inside a slot (LyapunovPolicy, which may start several per slot):
        Z pays the served work ``served`` = k*Cost_i(1) and gains eps on the slot's
        ``first`` start only; Q loses the job's own ``leaving`` = Cost_i(1), which keeps Q
        equal to the waiting work whatever the reading of k (module docstring)."""
        self.Z = update_Z(self.Z, self.Q, self.eps if first else 0.0, served)
        self.Q = update_Q(self.Q, leaving)

    def wait(self) -> None:
        """A slot closes with nothing started: Z grows by eps while work waits, else
        halves; Q keeps its value."""
        self.Z = update_Z(self.Z, self.Q, self.eps, 0.0)
        self.Q = update_Q(self.Q, 0.0)

    def arrive(self, arrivals: Iterable[float]) -> None:
        """Add work to Q outside a slot boundary (e.g. jobs present at t = 0)."""
        self.Q += sum(arrivals)

    def decide(self, costs: Mapping[int, float], cost1: float, V: float, free_gpus: int,
               max_gpus: int, k: str = "gpus") -> int:
        return decide(costs, cost1, self.Q, self.Z, V, free_gpus, max_gpus, k)
