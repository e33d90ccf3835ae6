"""The sluice policy pricing placements with the fabric's priority, against the fair
share: the same workloads through the simulator with uplink priority on,
pricing off (the baseline, measured in the same run) and on.

Both runs of a cell have the fabric's strict priority by ``--rule`` on the rack uplinks
(``Simulator(priority=RULE)``); they differ only in how sluice prices a candidate
placement's bandwidth: the fair share (``price_priority=None``, today) or the share of the
class the rule would put the job in (``price_priority=RULE``,
job_scheduler/core/priority_pricing.py). Pricing only moves sluice's GPU count (Liquid's
best fit places every count the same way), and only where a candidate spans racks whose
uplinks other jobs cross. Cells (average JCT, the mean over seeds for generated ones):

  * the four Proteus scenarios, bursty-moderate and bursty-heavy on two-rack (P100-derived
    profile, slot 10 s), tiresias-60 (max_gpus up to 8) on two-rack (slot 1 s);
  * the `sluice demo` jobs on two-rack-100g (H100 profile, slot 1 s);
  * philly-drawn: 80 jobs drawn (seeded) from the Philly trace's jobs of at most 8 GPUs
    (their GPU counts and durations), Poisson arrivals at an offered load of 0.9 of
    two-rack-100g's 16 GPUs (H100 profile, slot 10 s): the kind of workload the
    demo's arms run, not their generator;
  * cross-rack: proteus-big-dispersed and bursty-heavy on racks of two one-GPU hosts
    (leaf-spine, 8 racks, 5 Gbit/s uplinks), where every job of more than 2 GPUs spans
    racks: a cluster built to make the uplinks matter, not one anyone runs.

Per cell: avg JCT with the fabric's priority off (for scale), pricing off and on (and
their ratio), how many candidate placements sluice priced with priority and how many of
those prices were not the fair share, how many jobs ran at another GPU count, and the
simulation's wall time off and on.

    .venv/bin/python -m bench.scheduler.bench_price_priority [--seeds 0,1,2] [--rule remaining] [--quick]
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import replace

from bench import harness
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.policies import make_policy
from job_scheduler.simulation.simulator import Simulator
from job_scheduler.simulation.workloads import SCENARIOS, SHARED_WORKLOADS, load_workload
from job_scheduler.simulation.bursty import BURSTY
from sluice_common import rank_rules
from sluice_common.rank_rules import DEFAULT_RULE
from topologies import load_topology

DEMO_JOBS = harness.ROOT / "end_to_end" / "data" / "demo_jobs.yaml"
CROSS_RACK = "leaf-spine:leaves=8,spines=1,hosts_per_leaf=2,gpus=1,uplink_bw=5000"


def cells(seeds, quick: bool):
    """(label, topology, slot, profile, [job lists, one per seed])"""
    two = load_topology("two-rack")
    out = [(sc.replace("proteus-", ""), two, 10.0, "p100",
            [load_workload(sc, seed=s) for s in seeds]) for sc in SCENARIOS]
    out += [(name, two, 10.0, "p100", [load_workload(name, seed=s) for s in seeds])
            for name in BURSTY]
    demo = load_topology("two-rack-100g")
    out.append(("demo jobs (two-rack-100g)", demo, 1.0, "h100",
                [load_workload(str(DEMO_JOBS))]))
    if quick:
        return out
    philly = [j for j in load_workload(SHARED_WORKLOADS / "philly.csv", trace_format="philly")
              if j.trace_gpus <= 8 and j.trace_duration > 0]
    out.append(("philly-drawn, load 0.9 (two-rack-100g)", demo, 10.0, "h100",
                [philly_drawn(philly, demo.total_gpus, s) for s in seeds]))
    tir = SHARED_WORKLOADS / "tiresias_60_job.csv"
    out.append(("tiresias-60 (paper)", two, 1.0, "p100",
                [load_workload(tir, trace_format="tiresias", trace_caps="paper")]))
    cross = load_topology(CROSS_RACK)
    for name in ("proteus-big-dispersed", "bursty-heavy"):
        out.append((f"{name.replace('proteus-', '')} (cross-rack)", cross, 10.0, "p100",
                    [load_workload(name, seed=s) for s in seeds]))
    return out


class CountingSimulator(Simulator):
    """The simulator, counting the candidate placements sluice prices with priority and
    those whose price is not the fair share (another job crosses one of their uplinks)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.priced = self.differs = 0

    def priority_bandwidth(self, placement, j, rule):
        bw = super().priority_bandwidth(placement, j, rule)
        self.priced += 1
        self.differs += bw != self.live_bandwidth(placement)
        return bw


def philly_drawn(philly, gpus: int, seed: int, count: int = 80, load: float = 0.9):
    """``count`` jobs drawn from ``philly`` with Poisson arrivals at ``load`` of ``gpus``
    (the drawn jobs' mean GPU-seconds over the cluster's GPUs sets the rate)."""
    rng = random.Random(f"philly-drawn/{seed}")
    pick = [rng.choice(philly) for _ in range(count)]
    rate = load * gpus / statistics.mean(j.trace_gpus * j.trace_duration for j in pick)
    out, t = [], 0.0
    for i, j in enumerate(pick):
        out.append(replace(j, name=f"philly-drawn-{i}", arrival=t))
        t += rng.expovariate(rate)
    return out


def run(topo, jobs, slot, profile, seed, rule, price) -> tuple[float, list[int], float, tuple]:
    """(avg JCT, each job's GPU count, wall seconds, (priced, priced off the fair share))
    of sluice on one job list; ``rule`` None: the fabric's priority off."""
    t0 = time.perf_counter()
    policy = make_policy("sluice", seed=seed, price_priority=price)
    sim = CountingSimulator(topo, jobs, policy, slot=slot, priority=rule,
                            estimator=Estimator(profile))
    res = sim.run()
    return res.avg_jct, res.gpus, time.perf_counter() - t0, (sim.priced, sim.differs)


def main() -> int:
    ap = harness.parser(__doc__, quick="leave out philly-drawn, tiresias-60 and the cross-rack "
                        "cells",
                        json_out=False)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--rule", default=DEFAULT_RULE, choices=rank_rules.names(),
                    help=f"the fabric's rule and the pricing's (default {DEFAULT_RULE})")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.perf_counter()
    print(f"sluice, uplink priority {args.rule} on; pricing off (fair share) vs on "
          f"({args.rule}); seeds {seeds} for generated workloads")
    print("| cell | no priority s | avg JCT off s | avg JCT on s | on / off | per seed on / off "
          "| priced / off the fair share | jobs at another count | wall off s | wall on s |")
    print("|---|---:|---:|---:|---:|---|---|---:|---:|---:|")
    ratios, walls = [], [0.0, 0.0]
    for label, topo, slot, profile, lists in cells(seeds, args.quick):
        none, off, on, moved, wall, priced = [], [], [], 0, [0.0, 0.0], [0, 0]
        for jobs, seed in zip(lists, seeds):
            none.append(run(topo, jobs, slot, profile, seed, None, None)[0])
            a = run(topo, jobs, slot, profile, seed, args.rule, None)
            b = run(topo, jobs, slot, profile, seed, args.rule, args.rule)
            off.append(a[0])
            on.append(b[0])
            moved += sum(x != y for x, y in zip(a[1], b[1]))
            wall = [wall[0] + a[2], wall[1] + b[2]]
            priced = [priced[0] + b[3][0], priced[1] + b[3][1]]
        m_off, m_on = statistics.mean(off), statistics.mean(on)
        walls = [walls[0] + wall[0], walls[1] + wall[1]]
        ratios.append(m_on / m_off)
        per_seed = " ".join(f"{y / x:.3f}" for x, y in zip(off, on))
        print(f"| {label} | {statistics.mean(none):,.1f} | {m_off:,.1f} | {m_on:,.1f} "
              f"| {m_on / m_off:.3f} | {per_seed} | {priced[0]} / {priced[1]} | {moved} "
              f"| {wall[0]:.2f} | {wall[1]:.2f} |", flush=True)
        harness.figure(f"avg JCT, sluice pricing with {args.rule}, {label}", m_on, "s",
                       baseline=m_off, note="(baseline: pricing off, same run)")
    harness.figure("geometric mean of on / off over the cells",
                   statistics.geometric_mean(ratios), "", baseline=1.0)
    harness.figure("simulation wall time, pricing on", walls[1], "s", baseline=walls[0],
                   note="(baseline: pricing off)")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
