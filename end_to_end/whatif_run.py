"""``sluice whatif``'s simulations: each of the demo's arms (``end_to_end.arms``) run in
the discrete-event simulator on one job list and topology, side by side in a pool of
processes (forked: the jobs and the topology are inherited, never pickled), each
returning its figures (``end_to_end.whatif.arm_metrics``) and the CPU it took.

An arm's run is what ``sluice simulate`` does with the arm's options: its policy (and
placement, and price rule) from :meth:`Arm.make_policy`, the uplinks strict-priority by
the controller's rule when the arm has priority (``--priority RULE``), and the estimator
with the exchange model's pricing on the cluster as described or on its emulated fabric
(``--exchange``).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Sequence

from end_to_end.arms import Arm
from end_to_end.whatif import arm_metrics
from sluice_common.jobspec import JobSpec
from sluice_common.rank_rules import DEFAULT_RULE
from topologies import Topology


@dataclass(frozen=True)
class SimOptions:
    exchange: str = "cluster"          # off | cluster | emulated
    profile: str | None = None         # device profile for Cost_bat (None: the default)
    slot: float = 10.0                 # scheduling slot, seconds
    rank: str = DEFAULT_RULE           # the controller's rule (priority arms, arm d's price)
    seed: int = 0


def estimator_for(topology: Topology, options: SimOptions):
    from job_scheduler.core.estimator import Estimator
    from job_scheduler.core.exchange_pricing import ExchangePricing

    pricing = (None if options.exchange == "off" else
               ExchangePricing.for_topology(topology, emulated=options.exchange == "emulated"))
    return Estimator(options.profile, exchange=pricing)


def run_arm(topology: Topology, jobs: Sequence[JobSpec], arm: Arm, options: SimOptions,
            progress: Callable[[int, int], None] | None = None) -> dict:
    """One arm's figures, with the seconds of CPU and wall its simulation took."""
    from job_scheduler.simulation.simulator import Simulator

    wall, cpu = time.perf_counter(), time.process_time()
    sim = Simulator(topology, jobs, arm.make_policy(options.rank, options.seed),
                    estimator=estimator_for(topology, options), slot=options.slot,
                    progress=progress, priority=options.rank if arm.priority else None)
    result = sim.run()
    out = arm_metrics(result, arm.key, arm.title)
    out["cpu_s"] = time.process_time() - cpu
    out["wall_s"] = time.perf_counter() - wall
    return out


# what the forked workers inherit: (topology, jobs, options, done counts per arm)
_SHARED: tuple | None = None


def _worker(index: int, arm: Arm) -> dict:
    topology, jobs, options, done = _SHARED

    def progress(count: int, total: int) -> None:
        done[index] = count
    return run_arm(topology, jobs, arm, options, progress)


def run_arms(topology: Topology, jobs: Sequence[JobSpec], arms: Sequence[Arm],
             options: SimOptions, workers: int | None = None,
             progress: Callable[[str, int, int], None] | None = None) -> dict[str, dict]:
    """Every arm's figures, in ``arms``' order; ``workers`` processes at once (None:
    as many as arms, at most the CPUs; 1: in this process). ``progress(arm key, done,
    total)`` is told the jobs each arm has finished, about twice a second."""
    global _SHARED
    workers = min(len(arms), os.cpu_count() or 1) if workers is None else workers
    if workers <= 1 or len(arms) <= 1:
        return {arm.key: run_arm(topology, jobs, arm, options,
                                 (lambda d, t, k=arm.key: progress(k, d, t)) if progress
                                 else None) for arm in arms}
    ctx = multiprocessing.get_context("fork")
    done = ctx.Array("l", len(arms), lock=False)
    _SHARED = (topology, list(jobs), options, done)
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(_worker, i, arm): arm for i, arm in enumerate(arms)}
            pending = set(futures)
            while pending:
                _, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for i, arm in enumerate(arms) if progress else ():
                    progress(arm.key, done[i], len(jobs))
            results = {futures[f].key: f.result() for f in futures}
    finally:
        _SHARED = None
    return {arm.key: results[arm.key] for arm in arms}
