"""``sluice``: Proteus' GPU-count decision and Liquid placement, plus what
the measurements showed `lyapunov` lacks (bench/results/sluice.md).

What it keeps:

* **GPU count**: the drift-plus-penalty decision with k = 1 per started job
  (``proteus.py``), under which the two queue terms are the same for every n > 0, so the
  count is the argmin of the penalty. The penalty is C(n) on the Liquid best-fit
  placement n would get now (live bandwidth, in-host bus included), as in lyapunov.
* **Placement**: Liquid best fit (``placement.BestFitPlacement``).
* **Pricing** (``price_priority``, off unless set): C(n) at the bandwidth the placement
  would get in the priority class the fabric's rule gives the job
  (``priority_pricing``), not at the fair share: a job the rule puts on top is not
  kept off an uplink that priority keeps fast for it.

What it adds:

* **The queue's GPU time is priced.** lyapunov's argmin C(n) looks at the head job
  alone: it takes 4 GPUs for a 1.5x speed-up while the jobs behind wait for them. The
  penalty here is ``P(n) = C(n) * (1 + B * n / G)``: the job's own time plus, for each
  of the B jobs waiting behind it, the delay its n*C(n) GPU-seconds cause on a
  G-GPU cluster (a job behind waits on average for 1/G of the GPU time ahead of it).
  B = 0 gives lyapunov's argmin C(n); a long queue favours the most efficient count
  (n = 1 when exchange costs anything). On an ideal fabric n*C(n) is the same for
  every n, so a job takes all it may.
* **Shortest predicted remaining work first.** Waiting jobs are ordered by the
  estimator's predicted remaining GPU-seconds, ``Cost(1) x work left`` (times the
  estimate error in the robustness runs). A job whose estimate is missing is ordered
  by its attained GPU-seconds instead (least attained service first), on the same
  scale.
* **Preemption at a cost.** When no GPU is free and the best waiting job's predicted
  remaining work is less than 1/``preempt_factor`` of a running job's (after adding
  the restart cost), the running job with the most predicted work left is suspended
  and pays ``preempt_cost_s`` seconds, GPUs held without progress, when it resumes.
  ``DEFAULT_PREEMPT_COST_S`` is an assumed figure until suspend/resume is measured on
  the real runtime. No policy decides without a start: the policy is work-conserving
  (lyapunov's wait gate S(n) < 0 is dropped: on an idle GPU waiting only adds time).

* **Regrowing onto idle GPUs.** A job started small because a queue was waiting
  keeps that count when the queue has drained. When nothing waits and GPUs are idle,
  a running job below its best count is suspended and restarted on more GPUs (a
  resize, paid at ``preempt_cost_s`` like a preemption) when its predicted remaining
  time falls by more than ``DEFAULT_REGROW_GAIN`` and by more than twice that cost.
"""

from __future__ import annotations

import math
import random

from job_scheduler.core.fit_index import FitIndex
from job_scheduler.core.placement import DEFAULT_LAMBDA, BestFitPlacement
from job_scheduler.core.policies.base import Policy, PolicyOptions, candidate_costs
from job_scheduler.core.proteus import candidate_counts
from sluice_common import rank_rules

# Suspend + resume of a PS job: checkpoint the parameters, free the GPUs, later start
# the processes again and restore. An assumption (no measured figure yet): 10 s.
DEFAULT_PREEMPT_COST_S = 10.0
# Suspend a running job only for a job with at most half its predicted remaining work:
# estimates are noisy and every preemption costs, so a near tie is not worth one.
DEFAULT_PREEMPT_FACTOR = 2.0
# Resize a running job only for a clear gain: its remaining time must fall by 20 %.
DEFAULT_REGROW_GAIN = 0.2


def priced_penalty(C_n: float, n: int, behind: int, total_gpus: int) -> float:
    """P(n) = C(n) * (1 + B*n/G): the job's time plus the delay its n*C(n)
    GPU-seconds put on each of the B jobs behind it (module docstring)."""
    return C_n * (1.0 + behind * n / total_gpus)


def choose_count(costs: dict[int, float], behind: int, total_gpus: int) -> int:
    """argmin over n of ``priced_penalty`` with B = ``behind``, the jobs waiting behind
    this one (ties: fewer GPUs); 0 when no candidate. (Counting only the jobs that
    would find no free GPU was tried: 5-25 % worse on the ideal-fabric workloads,
    within 2 % elsewhere, because the jobs that do start are then slowed on fewer
    GPUs.)"""
    best_n, best_p = 0, math.inf
    for n in sorted(costs):
        p = priced_penalty(costs[n], n, behind, total_gpus)
        if p < best_p:
            best_n, best_p = n, p
    return best_n


def worth_waiting(C_now: float, C_full: float, wait_s: float) -> bool:
    """Start now on fewer GPUs than the job may use, or wait ``wait_s`` for them?
    Wait when that still finishes first: ``wait_s + C_full < C_now``."""
    return wait_s + C_full < C_now


class SluicePolicy(Policy):
    name = "sluice"

    def __init__(self, lam: float = DEFAULT_LAMBDA, seed: int = 0,
                 preempt_cost_s: float = DEFAULT_PREEMPT_COST_S,
                 preempt_factor: float = DEFAULT_PREEMPT_FACTOR,
                 estimate_error: float = 0.0, blind: frozenset[int] | None = None,
                 preempt: bool = True, wait_for_gpus: bool = True,
                 price_priority: str | None = None):
        if preempt_cost_s < 0 or preempt_factor < 1 or estimate_error < 0:
            raise ValueError("preempt_cost_s >= 0, preempt_factor >= 1, estimate_error >= 0")
        if price_priority is not None and price_priority not in rank_rules.names():
            raise ValueError(f"price_priority: unknown rule {price_priority!r} (known: "
                             f"{', '.join(rank_rules.names())})")
        # the fabric's rule a candidate placement is priced under (None: the fair share)
        self.price_priority = price_priority
        self.placer = BestFitPlacement(lam)
        self.preempt_cost_s = float(preempt_cost_s)
        self.preempt_factor = float(preempt_factor)
        self.wait_for_gpus = wait_for_gpus
        self.preempt = preempt
        # the policy's view of each job's size: true x exp(N(0, sigma)), drawn once
        self.estimate_error = float(estimate_error)
        self._rng = random.Random(f"sluice-error/{seed}")
        self._err: dict[int, float] = {}
        self.blind = frozenset(blind or ())        # jobs whose estimate is missing
        self._attained: dict[int, float] = {}      # GPU-seconds, blind jobs only
        self._since: dict[int, float] = {}         # blind running jobs: start of this run
        self._waiting = FitIndex()                 # key (predicted remaining, j)
        self._small: set[int] = set()              # running below their best count
        self._best: dict[int, int] = {}            # argmin C(n) alone, per job
        self._tried: dict[int, int] = {}           # free GPUs at a job's last regrow try

    # ---- the policy's estimates -------------------------------------------------------
    def _factor(self, j: int) -> float:
        f = self._err.get(j)
        if f is None:
            f = self._err[j] = (math.exp(self._rng.gauss(0.0, self.estimate_error))
                                if self.estimate_error else 1.0)
        return f

    def predicted_remaining(self, sim, j: int) -> float:
        """Predicted GPU-seconds of work left (attained GPU-seconds for a blind job)."""
        if j in self.blind:
            run = sim.running.get(j)
            done = self._attained.get(j, 0.0)
            if run is not None:
                done += run.n * max(sim.now - self._since[j], 0.0)
            return done
        return sim.models[j].cost1 * self._factor(j) * sim.remaining(j)

    # ---- simulator hooks ----------------------------------------------------------------
    def on_arrival(self, sim, j: int) -> None:
        self._factor(j)                 # draw in arrival order: a seed fixes the errors
        self._waiting.add(j, (self.predicted_remaining(sim, j), j), 1)

    # the mechanisms' hooks (time-slicing, packing)
    def on_requeue(self, sim, j: int) -> None:
        if j in self.blind:       # already suspended: add the run that just ended
            since = self._since.pop(j, sim.now)
            self._attained[j] = self._attained.get(j, 0.0) + sim.ran_gpus[j] * (sim.now - since)
        self._small.discard(j)
        self._waiting.add(j, (self.predicted_remaining(sim, j), j), 1)

    def on_packed(self, sim, j: int) -> None:
        self._waiting.remove(j)
        if j in self.blind:
            self._since[j] = sim.now

    # needs: the base's 1; wants_slot: the base's False (priorities change only at
    # arrivals and completions)

    def regrow(self, sim) -> None:
        """Nothing waits and GPUs are idle: resize running jobs that would finish
        clearly sooner on more GPUs, the one with the least predicted work left first."""
        if not self.preempt:
            return
        state = sim.state
        # (a job without an estimate has no predicted remaining time to judge by)
        cands = [k for k in self._small if k in sim.running and k not in self.blind]
        cands.sort(key=lambda k: self.predicted_remaining(sim, k))
        for k in cands:
            if not state.total_free:
                return
            if self._tried.get(k, -1) >= state.total_free:
                continue            # no more GPUs free than when it last could not grow
            run = sim.running[k]
            left = self._left_s(sim, k)
            if math.isinf(left):
                continue            # a real job still starting: its end is not known yet
            self._tried[k] = state.total_free
            ids = state.release(run.placement)     # tentatively: what could it have?
            limit = min(sim.jobs[k].max_gpus, state.total_free)
            costs, places = candidate_costs(sim, k, limit, self.placer,
                                           price_priority=self.price_priority)
            state.allocate(run.placement, ids)     # the very GPUs it holds
            n = choose_count(costs, 0, state.total_gpus)
            if n <= run.n:
                continue
            frac = sim.remaining(k)
            new = self.preempt_cost_s + frac * costs[n] * self._factor(k)
            if new < (1 - DEFAULT_REGROW_GAIN) * left and left - new > 2 * self.preempt_cost_s:
                sim.preempt(k, self.preempt_cost_s)
                sim.start(k, places[n])
                sim.decisions += 1
                self._tried.pop(k, None)
                if n >= self._lone_best(sim, k):
                    self._small.discard(k)

    def on_leave(self, sim, j: int) -> None:
        if j in self._waiting:
            self._waiting.remove(j)
        self.on_complete(sim, j)

    def on_complete(self, sim, j: int) -> None:
        self._small.discard(j)
        for d in (self._since, self._best, self._tried, self._attained, self._err):
            d.pop(j, None)

    # ---- decisions ----------------------------------------------------------------------
    def _start(self, sim, j: int, behind: int) -> bool:
        job = sim.jobs[j]
        free = sim.state.total_free
        limit = min(job.max_gpus, free)
        if limit <= 0:
            return False
        sim.decisions += 1
        costs, places = candidate_costs(sim, j, limit, self.placer,
                                       price_priority=self.price_priority)
        n = choose_count(costs, behind, sim.state.total_gpus)
        if n == 0:
            return False
        want = min(job.max_gpus, sim.state.total_gpus)
        if (self.wait_for_gpus and n == limit < want
                and self._better_later(sim, j, costs[n], want)):
            return False
        self._waiting.remove(j)
        sim.start(j, places[n])
        if j in self.blind:
            self._since[j] = sim.now
        self._tried.pop(j, None)
        if n < self._lone_best(sim, j):
            self._small.add(j)      # below its best count on an empty cluster: may regrow
        return True

    def _lone_best(self, sim, j: int) -> int:
        """argmin C(n) of the job alone on the empty cluster (best-fit placements)."""
        best = self._best.get(j)
        if best is None:
            model, top = sim.models[j], min(sim.jobs[j].max_gpus, sim.state.total_gpus)
            best = self._best[j] = min(candidate_counts(top),
                                       key=lambda n: (model.C(n, sim.reference_bandwidth(n),
                                                                      sim.reference_path(n)), n))
        return best

    def _better_later(self, sim, j: int, C_now: float, want: int,
                      freed: int | None = None) -> bool:
        """Would the job finish sooner by waiting for ``want`` GPUs to free up? The wait
        is read off the running jobs' predicted ends; the count then is judged at the
        nominal C(want) (on an empty cluster's best-fit placement). ``freed``: as if that
        running job were suspended now (its GPUs free, its end not awaited)."""
        free = sim.state.total_free + (sim.running[freed].n if freed is not None else 0)
        ends = sorted((sim.now + self._left_s(sim, k), sim.running[k].n)
                      for k in sim.running
                      if k not in self.blind and k != freed)   # unknown ends: never
        for t, n in ends:
            free += n
            if free >= want:
                C_full = sim.models[j].C(want, sim.reference_bandwidth(want),
                                         sim.reference_path(want))
                return worth_waiting(C_now, C_full, t - sim.now)
        return False

    def _left_s(self, sim, k: int) -> float:
        """Predicted seconds until running job k ends."""
        run = sim.running[k]
        rate = run.rate or 1.0 / sim.models[k].C(run.n, run.bw, sim.exchange_path(run.placement))
        return sim.remaining(k) / rate * self._factor(k) + max(run.t_last - sim.now, 0.0)

    def _victim(self, sim, rem_w: float) -> int | None:
        """The running job with the most predicted work left, if preempting it for a
        job with ``rem_w`` left pays (module docstring)."""
        if not sim.running:
            return None
        best = max(sim.running, key=lambda j: self.predicted_remaining(sim, j))   # first of ties
        best_rem = self.predicted_remaining(sim, best)
        cost = self.preempt_cost_s * sim.running[best].n
        return best if best_rem > self.preempt_factor * rem_w + cost else None

    def _waits_anyway(self, sim, j: int, victim: int) -> bool:
        """Would job j, given the victim's GPUs, still wait for more of them (so the
        suspension frees GPUs j does not take)? Judged at the nominal C(n) on the GPUs it
        would have. Without this, a loop that decides every slot (the service) suspended
        the victim, started it again the next slot (j still waiting), and so on."""
        job = sim.jobs[j]
        want = min(job.max_gpus, sim.state.total_gpus)
        limit = min(job.max_gpus, sim.state.total_free + sim.running[victim].n)
        if not self.wait_for_gpus or limit >= want:
            return False
        C_now = sim.models[j].C(limit, sim.reference_bandwidth(limit), sim.reference_path(limit))
        return self._better_later(sim, j, C_now, want, freed=victim)

    def step(self, sim) -> None:
        order = [j for _, j, _ in self._waiting.ordered()]
        for pos, j in enumerate(order):
            behind = len(order) - pos - 1
            if sim.state.total_free == 0:
                if not self.preempt:
                    return
                victim = self._victim(sim, self.predicted_remaining(sim, j))
                if victim is None or self._waits_anyway(sim, j, victim):
                    return
                sim.preempt(victim, self.preempt_cost_s)
                self.on_requeue(sim, victim)        # it waits again, its run counted
            self._start(sim, j, behind)


def make(o: PolicyOptions) -> SluicePolicy:
    pol = SluicePolicy(lam=o.lam, seed=o.seed, estimate_error=o.estimate_error,
                       price_priority=o.price_priority)
    pol.placer = o.placer("best-fit")
    return pol
