"""PIAS's demotion thresholds from a flow-size distribution and a load (pure).

PIAS (Bai et al., "PIAS: Practical Information-Agnostic Flow Scheduling for Data Center
Networks", NSDI 2015) tags each flow at its sender by the bytes it has sent so far: a
flow starts in the most urgent of K strict-priority queues and is demoted one queue each
time its bytes pass a threshold ``alpha_1 < ... < alpha_{K-1}``. The thresholds are
chosen offline from the flow-size distribution F and the load rho: each queue is
modelled as a queue served with the capacity the more urgent queues leave, a flow of
size x passes through every queue up to the one its size ends in, and the K-1
thresholds are those that minimise the mean flow completion time (FCT).

The model used here (all times in units of "bytes at link rate", capacity 1):

- flows arrive as a Poisson process of rate ``lambda = rho / E[X]`` (rho: the offered
  load of the link the thresholds are for); flow l's *segment* in queue l is
  ``s_l(x) = min(x, alpha_l) - min(x, alpha_{l-1})`` (``alpha_0 = 0``, ``alpha_K = inf``);
- queue l carries the load ``rho_l = lambda E[s_l(X)]``; ``sigma_l = rho_1 + ... + rho_l``;
- each queue is a preemptive-priority queue below the more urgent ones, whose segments
  arrive independently of the other queues' (PIAS's independence simplification). The
  mean time a segment of size s spends in queue l is then (Cobham/Kleinrock)
  ``s / (1 - sigma_{l-1}) + R_l / ((1 - sigma_{l-1}) (1 - sigma_l))`` with
  ``R_l = lambda/2 * sum_{m<=l} E[s_m(X)^2]`` the residual work of queues 1..l;
- **M/M/1** (PIAS's assumption, ``exponential=True``, the default): each queue's segment
  sizes are exponential with their mean, so ``E[s_m^2]`` is taken as
  ``2 E[s_m | reached]^2`` per segment that reaches queue m; ``exponential=False`` uses
  the distribution's own second moments (M/G/1; larger under a heavy tail);
- mean FCT ``= sum_l ( E[s_l(X)] / (1 - sigma_{l-1})
  + P(X > alpha_{l-1}) R_l / ((1 - sigma_{l-1})(1 - sigma_l)) )``.

With K = 1 this is the M/G/1 (or M/M/1) FIFO queue's mean sojourn, the deep FIFO's; with
many thresholds it tends to least-attained-service. The minimum is found by coordinate
descent over a log-spaced grid of candidate thresholds spanning the distribution's
support (deterministic; started from thresholds evenly spaced on that log grid, one
threshold moved at a time while the mean FCT falls), not by PIAS's own solver: the
solver is a means, the objective is what defines the thresholds.

Assumptions worth knowing: one bottleneck link, flows independent, sizes as bytes on
the wire (connbytes counts whole IP packets, so headers add ~3 % to each flow's count);
the distribution is the workload's, not measured (PIAS re-derives it periodically).

Flow sizes are a mixture of log-uniform components (:class:`SizeMixture`), which is
exactly what the heavy-tail mix generates (a whole number of batches, each of a
log-uniform size: ``mininet_tests/heavy_tail/connection_sizes.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SizeMixture:
    """A flow-size distribution: with probability ``weight`` a flow's size is log-uniform
    on ``[lo, hi]`` (``lo == hi``: exactly ``lo``). Weights sum to 1."""

    components: tuple[tuple[float, float, float], ...]     # (weight, lo, hi)

    def __post_init__(self):
        if not self.components:
            raise ValueError("a size distribution needs at least one component")
        for w, lo, hi in self.components:
            if not (w >= 0 and 0 < lo <= hi):
                raise ValueError(f"component (weight {w}, lo {lo}, hi {hi}) needs weight >= 0 "
                                 "and 0 < lo <= hi")
        total = sum(w for w, _, _ in self.components)
        if not math.isclose(total, 1.0, rel_tol=1e-6):
            raise ValueError(f"the weights sum to {total}, not 1")

    @property
    def support(self) -> tuple[float, float]:
        used = [(lo, hi) for w, lo, hi in self.components if w > 0]
        return min(lo for lo, _ in used), max(hi for _, hi in used)

    def _each(self, one) -> float:
        return sum(w * one(lo, hi) for w, lo, hi in self.components if w > 0)

    def survival(self, a: float) -> float:
        """P(X > a)."""
        def one(lo, hi):
            if a < lo:
                return 1.0
            if a >= hi:
                return 0.0
            return math.log(hi / a) / math.log(hi / lo)
        return self._each(one)

    def capped_mean(self, a: float) -> float:
        """E[min(X, a)] (``a = inf``: E[X])."""
        def one(lo, hi):
            if a <= lo:
                return a
            if hi == lo:
                return lo
            span = math.log(hi / lo)
            if a >= hi:
                return (hi - lo) / span
            return (a - lo) / span + a * math.log(hi / a) / span
        return self._each(one)

    def capped_square(self, a: float) -> float:
        """E[min(X, a)^2]."""
        def one(lo, hi):
            if a <= lo:
                return a * a
            if hi == lo:
                return lo * lo
            span = math.log(hi / lo)
            if a >= hi:
                return (hi * hi - lo * lo) / (2 * span)
            return (a * a - lo * lo) / (2 * span) + a * a * math.log(hi / a) / span
        return self._each(one)

    def mean(self) -> float:
        return self.capped_mean(math.inf)


def _moments(sizes: SizeMixture, a: float) -> tuple[float, float, float]:
    """(E[min(X,a)], E[min(X,a)^2], P(X > a)) at a threshold (0 and inf included)."""
    if a <= 0:
        return 0.0, 0.0, 1.0
    if a == math.inf:
        return sizes.mean(), sizes.capped_square(sizes.support[1]), 0.0
    return sizes.capped_mean(a), sizes.capped_square(a), sizes.survival(a)


def _fct(edges: list[tuple[float, tuple[float, float, float]]], lam: float,
         exponential: bool) -> float:
    """The mean FCT from each edge (alpha_0 = 0 .. alpha_K = inf) and its moments."""
    total, sigma, residual = 0.0, 0.0, 0.0
    for (below, (m_lo, q_lo, reach)), (_above, (m_hi, q_hi, _)) in zip(edges, edges[1:]):
        first = m_hi - m_lo                                   # E[s_l(X)]
        if reach <= 0 or first <= 0:
            continue
        if exponential:          # M/M/1: the segment's size exponential, with its mean
            second = 2 * first * first / reach
        else:  # E[(min(X,b) - min(X,a))^2] = E[min(X,b)^2] - E[min(X,a)^2] - 2a E[s_l]
            second = max(0.0, q_hi - q_lo - 2 * below * first)
        before = sigma
        sigma += lam * first
        residual += lam * second / 2
        total += first / (1 - before) + reach * residual / ((1 - before) * (1 - sigma))
    return total


def mean_fct(sizes: SizeMixture, load: float, thresholds: tuple[float, ...],
             exponential: bool = True) -> float:
    """The model's mean FCT (bytes at link rate, i.e. seconds at capacity 1) of flows of
    ``sizes`` at ``load`` under the demotion ``thresholds`` (increasing)."""
    if not 0 < load < 1:
        raise ValueError(f"load must be in (0, 1), got {load}")
    if any(b <= a for a, b in zip(thresholds, thresholds[1:])) or any(t <= 0 for t in thresholds):
        raise ValueError(f"thresholds must be positive and increasing, got {thresholds}")
    edges = [(a, _moments(sizes, a)) for a in (0.0, *thresholds, math.inf)]
    return _fct(edges, load / sizes.mean(), exponential)


def _grid(sizes: SizeMixture, per_decade: int) -> list[float]:
    lo, hi = sizes.support
    steps = max(2, int(math.ceil(math.log10(hi / lo) * per_decade)))
    return [lo * (hi / lo) ** (k / steps) for k in range(1, steps)]


def derive_thresholds(sizes: SizeMixture, load: float, queues: int,
                      exponential: bool = True, per_decade: int = 40) -> tuple[int, ...]:
    """The ``queues - 1`` demotion thresholds (bytes, increasing) that minimise
    :func:`mean_fct`, each on a grid of ``per_decade`` log-spaced points per decade of
    the distribution's support. Deterministic."""
    if queues < 1:
        raise ValueError(f"queues must be >= 1, got {queues}")
    if queues == 1:
        return ()
    grid = _grid(sizes, per_decade)
    if len(grid) < queues - 1:
        raise ValueError(f"the support is too narrow for {queues} queues at {per_decade} "
                         "points a decade")
    # start: thresholds at evenly spaced grid points (log-spaced bytes)
    idx = [round((k + 1) * (len(grid) - 1) / queues) for k in range(queues - 1)]
    idx = sorted(set(idx))
    while len(idx) < queues - 1:                      # a narrow grid: fill the gaps
        idx = sorted(set(idx) | {next(i for i in range(len(grid)) if i not in idx)})

    if not 0 < load < 1:
        raise ValueError(f"load must be in (0, 1), got {load}")
    at = [(g, _moments(sizes, g)) for g in grid]       # each candidate's moments, once
    ends = (0.0, _moments(sizes, 0.0)), (math.inf, _moments(sizes, math.inf))
    lam = load / sizes.mean()

    def cost(ix):
        return _fct([ends[0]] + [at[i] for i in ix] + [ends[1]], lam, exponential)

    best = cost(idx)
    improved = True
    while improved:
        improved = False
        for k in range(len(idx)):
            low = idx[k - 1] + 1 if k else 0
            high = idx[k + 1] - 1 if k + 1 < len(idx) else len(grid) - 1
            for i in range(low, high + 1):
                if i == idx[k]:
                    continue
                trial = idx[:k] + [i] + idx[k + 1:]
                c = cost(trial)
                if c < best * (1 - 1e-12):
                    best, idx, improved = c, trial, True
    return tuple(int(round(grid[i])) for i in idx)
