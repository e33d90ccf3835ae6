"""Fluid-model prediction of each ranking rule's mean JCT against fair sharing (no fabric).

    .venv/bin/python -m bench.fabric.bench_fluid_rules [--seeds 20]

For the heavy-tailed mix of the priority experiment (same generator and parameters) and
for the same jobs made link-bound (each job alone could fill both directions: no compute
gaps, like the coflows of Varys/Aalo), at load 0.7 and 0.9, and for the three-job
same-start case. Prints the median over seeds of the paired change against ``off``.
Why it matters: the emulated PS jobs compute 30-70 % of an iteration, so one job alone
keeps each direction of the uplink busy only part of the time; whether ranking can lower
mean JCT depends on how often the jobs' demands really exceed the link.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from mininet_tests import fluid
from mininet_tests.heavy_tail.predict import (PROFILE, PROFILE_MODEL, fluid_jobs,
                                              profile_compute_s, same_start_mix)
from mininet_tests.heavy_tail.config import BYTES_LO, SCALE
from mininet_tests.heavy_tail.mix import heavy_tail_mix

from bench import harness
from sluice_common import rank_rules

CAPACITY = 50e6 / 8      # the emulated uplink, bytes/s per direction


def changes(jobs: list[fluid.FluidJob]) -> dict[str, float]:
    off = fluid.mean(fluid.simulate(jobs, "off", CAPACITY, dt=0.02).values())
    return {r: 100 * (fluid.mean(fluid.simulate(jobs, r, CAPACITY, dt=0.02).values()) / off - 1)
            for r in rank_rules.names()}


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--scale", type=float, default=SCALE)
    ap.add_argument("--model", default=PROFILE_MODEL,
                    help="the profiled model whose compute per batch the jobs take")
    args = ap.parse_args()
    print("| workload | load | " + " | ".join(f"{r} vs off" for r in rank_rules.names()) + " |")
    print("|---|---|" + "---|" * len(rank_rules.names()))
    profile_s = profile_compute_s(model=args.model)
    variants = (("heavy-tail, emulated PS jobs (comm 30-70 %)", False, None),
                (f"heavy-tail, compute from the {PROFILE} profile ({args.model}, "
                 f"{1000 * profile_s:.1f} ms/batch)", False, profile_s),
                ("heavy-tail, link-bound jobs (no compute)", True, None))
    for load in (0.7, 0.9):
        for label, link_bound, compute_s in variants:
            per_seed = []
            for seed in range(1, args.seeds + 1):
                mix = heavy_tail_mix(seed, load, CAPACITY, jobs=args.jobs,
                                     scale=args.scale, bytes_lo=BYTES_LO,
                                     compute_s=compute_s)
                jobs = fluid_jobs(mix, CAPACITY)
                if link_bound:
                    jobs = [replace(j, rate_cap=2.0) for j in jobs]
                per_seed.append(changes(jobs))
            med = {r: statistics.median(c[r] for c in per_seed) for r in rank_rules.names()}
            print(f"| {label} | {load} | "
                  + " | ".join(f"{med[r]:+.1f} %" for r in rank_rules.names()) + " |")
    same = changes(fluid_jobs(same_start_mix(CAPACITY), CAPACITY))
    print("| 3 equal jobs, same start, comm 95 % | - | "
          + " | ".join(f"{same[r]:+.1f} %" for r in rank_rules.names()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
