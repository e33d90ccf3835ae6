"""Where a job's parameter server (PS) and workers go: pure placement logic, no I/O.

* :class:`ClusterState` (job_scheduler/core/cluster_state.py) — free GPUs per host, with
  per-rack / per-domain totals and free-count buckets so that a placement decision costs
  O(GPUs per host + racks), not O(hosts), on a 2,048-GPU cluster; and which GPU indices
  of each host each job holds (:class:`~sluice_common.placement.GpuGrant`, the lowest
  free ones unless a record names them: the same history gives the same indices in the
  simulator, the service and ``sluice run``).
* Liquid's rack cost ``Cost(a, b)``: 0 on the same node, the number of nodes in the rack
  for two nodes of one rack, the number of nodes in the domain across racks (and the
  number of nodes in the cluster across domains), and the instance score
  ``Score = lambda * Cost + (1 - lambda) * Fitness_j`` with
  ``Fitness_j = -(ReqGPU_j + UsedGPU_j) / TotalGPU_j``.
* Placement strategies behind one interface ``place(state, job, n, num_ps) -> Placement
  | None``: :class:`BestFitPlacement` (Liquid), :class:`FirstFitPlacement` (the FIFO/YARN
  baseline), :class:`TetrisPlacement` (cosine-similarity packing); and
  :class:`GroupGA`, Liquid's group genetic algorithm for a batch of simultaneous jobs.

One worker per GPU; a PS takes no GPU (it runs on a host's CPU) but is placed, because
where it sits decides which links its push/pull traffic crosses.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from job_scheduler.core.cluster_state import ClusterState
from sluice_common.placement import Placement

DEFAULT_LAMBDA = 0.5


def liquid_score(lam: float, cost: float, fitness: float) -> float:
    """Liquid's instance score ``Score = lambda * Cost + (1 - lambda) * Fitness`` (lower is
    better): best fit, the PS hosts and the group GA's objective all rank by it."""
    return lam * cost + (1 - lam) * fitness


def _score_idx(state: ClusterState, jobs: Sequence[tuple[list[int], list[int]]],
               lam: float) -> float:
    """The objective both best fit and the GA minimise, for placements *not yet*
    allocated in ``state`` (``jobs`` = (PS host indices, worker host indices) each):
    ``lambda * sum Cost(PS, worker) + (1 - lambda) * sum Fitness(host of worker)``,
    the fitness taken with every placement of the batch in."""
    extra = Counter(i for _, workers in jobs for i in workers)
    total = 0.0
    for ps, workers in jobs:
        for k, i in enumerate(workers):
            c = state.cost(ps[k % len(ps)], i) if ps else 0
            total += liquid_score(lam, c, state.fitness(i, req=0, extra_used=extra[i]))
    return total


# ---- strategies ------------------------------------------------------------------------

def _ps_hosts(state: ClusterState, counts: dict[int, int], num_ps: int,
              lam: float = DEFAULT_LAMBDA) -> list[int]:
    """PS instances go to the worker hosts with the lowest instance score (the host with
    most workers first: Cost 0 to its own workers), ties by host index."""
    if len(counts) == 1:                  # one host: nothing to choose
        (h,) = counts
        return [h] * max(num_ps, 0)

    def score(h: int) -> float:
        c = sum(k * state.cost(h, w) for w, k in counts.items())
        return liquid_score(lam, c, state.fitness(h, req=0, extra_used=counts[h]))
    ranked = sorted(counts, key=lambda h: (score(h), h))
    return [ranked[k % len(ranked)] for k in range(max(num_ps, 0))]


def _make(state: ClusterState, job: str, counts: dict[int, int], num_ps: int,
          lam: float = DEFAULT_LAMBDA) -> Placement:
    workers = [state.names[h] for h in sorted(counts) for _ in range(counts[h])]
    ps = [state.names[h] for h in _ps_hosts(state, counts, num_ps, lam)]
    return Placement(job, tuple(ps), tuple(workers))


def _first_fit(free: list[int], n: int, order: Sequence[int]) -> dict[int, int]:
    """Take free GPUs host by host in ``order`` until n (``free`` is updated)."""
    counts: dict[int, int] = {}
    if n <= 0:
        return counts
    # most hosts of a busy cluster have none free: skip them at one test each
    for h in order:
        f = free[h]
        if f > 0:
            take = n if n < f else f
            counts[h] = take
            free[h] = f - take
            n -= take
            if not n:
                break
    return counts


class BestFitPlacement:
    """Liquid best fit, instance by instance, inside the tightest locality that holds the
    whole job (a host, else a rack, else a domain, else the cluster) — that choice is
    what minimises the summed rack Cost; inside it each worker goes to the host with
    the lowest ``lambda*Cost + (1-lambda)*Fitness``. Once a host is chosen it stays the
    best for the next worker (its Cost to the job is 0 and its fitness only improves),
    so hosts are filled in one step."""

    name = "best-fit"

    def __init__(self, lam: float = DEFAULT_LAMBDA):
        self.lam = lam

    def place(self, state: ClusterState, job: str, n: int, num_ps: int = 1) -> Placement | None:
        if n <= 0 or n > state.total_free:
            return None
        host = state.smallest_host_with(n)
        if host is not None:
            return _make(state, job, {host: n}, num_ps, self.lam)
        scope = self._scope(state, n)
        return _make(state, job, self._fill(state, scope, n), num_ps, self.lam)

    def _scope(self, state: ClusterState, n: int) -> list[int]:
        racks = [r for r, f in enumerate(state.rack_free) if f >= n]
        if racks:   # tightest rack (fewest free GPUs), ties by index
            r = min(racks, key=lambda r: (state.rack_free[r], r))
            return state.rack_hosts[r]
        domains = [d for d, f in enumerate(state.domain_free) if f >= n]
        if domains:
            d = min(domains, key=lambda d: (state.domain_free[d], d))
            return [h for r in state.domain_racks[d] for h in state.rack_hosts[r]]
        return list(range(state.cluster_size))

    def _fill(self, state: ClusterState, scope: list[int], n: int) -> dict[int, int]:
        lam = self.lam
        counts: Counter = Counter()
        placed_rack: Counter = Counter()
        placed_domain: Counter = Counter()
        placed = 0
        candidates = [h for h in scope if state.free[h] > 0]
        while placed < n:
            best, best_key = None, None
            for h in candidates:
                on_host = counts[h]
                if state.free[h] - on_host <= 0:
                    continue
                r, d = state.rack_of[h], state.domain_of[h]
                in_rack, in_dom = placed_rack[r], placed_domain[d]
                c = (state.rack_size[r] * (in_rack - on_host)
                     + state.domain_size[d] * (in_dom - in_rack)
                     + state.cluster_size * (placed - in_dom))
                key = (liquid_score(lam, c, state.fitness(h, 1, on_host)), h)
                if best_key is None or key < best_key:
                    best, best_key = h, key
            take = min(n - placed, state.free[best] - counts[best])
            counts[best] += take
            placed_rack[state.rack_of[best]] += take
            placed_domain[state.domain_of[best]] += take
            placed += take
        return counts


class FirstFitPlacement:
    """The FIFO/YARN baseline: hosts in declaration order, take free GPUs until n."""

    name = "first-fit"

    def place(self, state: ClusterState, job: str, n: int, num_ps: int = 1) -> Placement | None:
        if n <= 0 or n > state.total_free:
            return None
        # n <= total_free: a pass over every host always finds the n
        return _make(state, job, _first_fit(list(state.free), n, range(state.cluster_size)),
                     num_ps)


class TetrisPlacement:
    """Tetris packing: put workers on the host whose free-resource vector is most
    aligned (cosine similarity) with the job's remaining demand. Resources per host:
    GPUs and NIC share (a distributed job's workers on a host load its NIC). Only the
    GPU dimension is hard; both are normalised by the host's capacity.

    The score of a host depends only on its free GPUs and its capacity, so hosts are
    scored per (free count, capacity) group (the free-count buckets of
    :class:`ClusterState`), the lowest index winning a tie as before: the same choice
    as scoring every host, without a pass over all hosts per worker (the Philly run on
    2,048 GPUs spent most of its time there)."""

    name = "tetris"

    @staticmethod
    def _score(avail: int, cap: int, left: int, n: int) -> tuple[float, int]:
        want = min(left, avail)
        # demand: GPUs wanted here, and NIC load when the job spans hosts
        demand = (want / cap, 0.0 if want == n else want / cap)
        supply = (avail / cap, avail / cap)
        dot = demand[0] * supply[0] + demand[1] * supply[1]
        norm = math.hypot(*demand) * math.hypot(*supply)
        return -(dot / norm if norm else 0.0), -want

    def place(self, state: ClusterState, job: str, n: int, num_ps: int = 1) -> Placement | None:
        if n <= 0 or n > state.total_free:
            return None
        counts: dict[int, int] = {}
        used: set[int] = set()      # a host is chosen once: the take empties it or ends the job
        left = n
        while left:
            best = None
            for free, bucket in state.hosts_by_free():
                hosts = bucket - used if used else bucket
                if free <= 0 or not hosts:
                    continue
                lowest: dict[int, int] = {}          # capacity -> lowest host index
                for h in hosts:
                    c = state.capacity[h]
                    if c not in lowest or h < lowest[c]:
                        lowest[c] = h
                for c, h in lowest.items():
                    key = (*self._score(free, c, left, n), h)
                    if best is None or key < best:
                        best = key
            h = best[2]
            take = min(left, state.free[h])
            counts[h] = take
            used.add(h)
            left -= take
        return _make(state, job, counts, num_ps)


# ---- Liquid's group genetic algorithm -------------------------------------------------

@dataclass(frozen=True)
class Request:
    job: str
    n: int
    num_ps: int = 1


class GroupGA:
    """Place a batch of simultaneous jobs together. A chromosome holds one gene per job:
    its worker -> host counts. Crossover takes each job's gene from either parent;
    mutation re-places one job first-fit over a shuffled host order; both are followed
    by a first-fit repair of the jobs that no longer fit. The population is seeded with
    the sequential best-fit solution and the best individual is always kept (elitism),
    so the result is never worse than best fit on :func:`_score_idx`. Seeded:
    the same seed gives the same placements."""

    population = 12            # individuals per generation
    generations = 20
    mutation = 0.2             # chance that a child re-places one job
    MAX_HOSTS = 64

    def __init__(self, lam: float = DEFAULT_LAMBDA, seed: int = 0):
        self.lam = lam
        self.seed = seed
        self.runs = 0          # searches run, and how many beat the best-fit seed
        self.improved = 0

    def _candidate_hosts(self, state: ClusterState, seeded: Sequence[Placement]) -> list[int]:
        """The hosts the search may use: those of the best-fit solution plus, up to
        MAX_HOSTS, free hosts of the tightest racks (what best fit would try next).
        Keeps a generation O(batch x 64) on a 512-host cluster."""
        chosen = {state.index[h] for p in seeded for h in p.worker_hosts}
        need = sum(p.gpus for p in seeded)
        racks = sorted((r for r in range(len(state.rack_hosts)) if state.rack_free[r] > 0),
                       key=lambda r: (state.rack_free[r], r))
        pool = [h for r in racks for h in state.rack_hosts[r] if state.free[h] > 0]
        out = sorted(chosen)
        seen = set(out)
        for h in pool:
            if len(out) >= max(self.MAX_HOSTS, len(chosen)) and \
                    sum(state.free[x] for x in out) >= need:
                break
            if h not in seen:
                out.append(h)
                seen.add(h)
        return out

    def place_batch(self, state: ClusterState, requests: Sequence[Request]) -> list[Placement | None]:
        """Placements for ``requests`` (not allocated in ``state``). Jobs that best fit
        cannot place in turn are returned as None and left out of the search."""
        rng = random.Random(self.seed)
        best_fit = BestFitPlacement(self.lam)
        work = state.copy()
        seeded: list[Placement | None] = []
        for req in requests:
            p = best_fit.place(work, req.job, req.n, req.num_ps)
            if p is not None:
                work.allocate(p)
            seeded.append(p)
        live = [i for i, p in enumerate(seeded) if p is not None]
        if len(live) < 2:
            return seeded
        if all(len(set(seeded[i].worker_hosts)) == 1 for i in live):
            return seeded      # every job on one host: Cost 0 each, nothing to gain
        reqs = [requests[i] for i in live]
        hosts = self._candidate_hosts(state, [seeded[i] for i in live])

        def decode(genes: list[dict[int, int]]) -> list[Placement]:
            return [_make(state, r.job, g, r.num_ps, self.lam) for r, g in zip(reqs, genes)]

        def score(genes: list[dict[int, int]]) -> float:
            # the score of decode(genes), without building Placement objects (this
            # runs population x generations times)
            return _score_idx(state, [
                (_ps_hosts(state, g, r.num_ps, self.lam),
                 [h for h in sorted(g) for _ in range(g[h])]) for r, g in zip(reqs, genes)],
                self.lam)

        pop = [[dict(Counter(state.index[h] for h in seeded[i].worker_hosts))  # type: ignore[union-attr]
                for i in live]]
        pop += [_random_genes(state.free, reqs, hosts, rng) for _ in range(self.population - 1)]
        scored = sorted(((score(g), k, g) for k, g in enumerate(pop)), key=lambda x: x[:2])
        seed_score = score(pop[0])
        tag = len(pop)
        for _ in range(self.generations):
            elite = scored[0]
            children = [elite]
            while len(children) < self.population:
                a = min(rng.sample(scored, 2), key=lambda x: x[:2])[2]
                b = min(rng.sample(scored, 2), key=lambda x: x[:2])[2]
                child = [dict(a[j] if rng.random() < 0.5 else b[j]) for j in range(len(reqs))]
                if rng.random() < self.mutation:
                    _mutate(child, state.free, reqs, hosts, rng)
                child = _repair(child, state.free, reqs, hosts)
                tag += 1
                children.append((score(child), tag, child))
            scored = sorted(children, key=lambda x: x[:2])
        best = decode(scored[0][2])
        self.runs += 1
        self.improved += scored[0][0] < seed_score - 1e-12
        for i, p in zip(live, best):
            seeded[i] = p
        return seeded


# ---- the group genetic algorithm's operators (PlacementGGA.place_batch) ------------------
# genes: per job, host index -> GPUs. Each takes the free GPUs as they were before the
# batch (``free0``) and the candidate hosts; the random ones draw from ``rng`` in a fixed
# order, so one seed gives one search.

def _repair(genes: list[dict[int, int]], free0: Sequence[int], reqs: Sequence[Request],
            hosts: Sequence[int]) -> list[dict[int, int]]:
    """Keep the jobs that still fit in turn; first-fit the others into what is left."""
    free = list(free0)
    out: list[dict[int, int] | None] = []
    broken = []
    for j, g in enumerate(genes):
        if all(free[h] >= k for h, k in g.items()):
            for h, k in g.items():
                free[h] -= k
            out.append(g)
        else:
            out.append(None)
            broken.append(j)
    for j in broken:
        out[j] = _first_fit(free, reqs[j].n, hosts)
    return out  # type: ignore[return-value]


def _random_genes(free0: Sequence[int], reqs: Sequence[Request], hosts: Sequence[int],
                  rng: random.Random) -> list[dict[int, int]]:
    """A random individual: the jobs in a random order, first-fit on shuffled hosts."""
    free = list(free0)
    order = list(hosts)
    rng.shuffle(order)
    jobs = list(range(len(reqs)))
    rng.shuffle(jobs)
    genes: list[dict[int, int]] = [{} for _ in reqs]
    for j in jobs:
        genes[j] = _first_fit(free, reqs[j].n, order)
    return genes


def _mutate(child: list[dict[int, int]], free0: Sequence[int], reqs: Sequence[Request],
            hosts: Sequence[int], rng: random.Random) -> None:
    """Move one random job: first-fit it on shuffled hosts around the others (in place;
    left as it was when the others alone overfill a host)."""
    j = rng.randrange(len(reqs))
    free = list(free0)
    for k, g in enumerate(child):
        if k != j:
            for h, c in g.items():
                free[h] -= c
    order = list(hosts)
    rng.shuffle(order)
    if all(f >= 0 for f in free):
        child[j] = _first_fit(free, reqs[j].n, order)
