"""Every policy x every workload x both worlds, and the sluice robustness runs.

Worlds: "ideal" = no communication time at all (``--no-network``, the Tiresias
simulator's world); "in-host+fabric" = the default model (exchange inside a host over
its ``intra_bw`` bus, across hosts over the fabric links, uplinks shared).

Workloads (average JCT; the mean over seeds for generated ones):
  * the four Proteus scenarios on two-rack (seeds, slot 10 s);
  * tiresias_60_job.csv on two-rack, slot 1 s, with max_gpus = the trace's count
    ("requested") and with max_gpus up to 8 ("paper", the scenarios' setting);
  * Philly slices: 2,000 consecutive jobs from three points of the trace on a 512-GPU
    leaf-spine (16 racks x 8 hosts x 4 GPUs, 2:1 oversubscribed), slot 60 s;
  * bursty-moderate and bursty-heavy (job_scheduler/simulation/bursty.py) on two-rack, slot 10 s.

Then sluice with a log-normal error on the sizes it sees (sigma 0.5 and 1.0; the jobs
run their true time) on the same cells, against las and the best other policy.

    .venv/bin/python -m bench.scheduler.bench_sluice [--seeds 0,1,2] [--quick] [--plot bench/plots/sluice_table.png]
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from pathlib import Path

from job_scheduler.simulation.bursty import BURSTY
from job_scheduler.core.policies import make_policy
from job_scheduler.simulation.simulator import simulate
from job_scheduler.simulation.workloads import SCENARIOS, SHARED_WORKLOADS, load_workload
from topologies import load_topology
import os

from bench import harness

# The figures of this bench in bench/RESULTS.md use the P100-derived profile, the GPU class
# the Proteus scenarios are sized for (the commands' default is the measured H100);
# SLUICE_PROFILE=h100 (or a profile file) re-runs them on another.
os.environ.setdefault("SLUICE_PROFILE", "p100")

POLICIES = ("sluice", "lyapunov", "las", "tetris", "fifo", "single", "random")
WORLDS = ("ideal", "in-host+fabric")
PHILLY_CLUSTER = "leaf-spine:leaves=16,spines=4,hosts_per_leaf=8"
PHILLY_SLICES = (20_000, 40_000, 60_000)
PHILLY_SLICE_JOBS = 2_000


def philly_slice(all_jobs, start: int, count: int):
    sl = all_jobs[start:start + count]
    first = sl[0].arrival
    return [replace(j, arrival=j.arrival - first) for j in sl]


def workloads(seeds, quick: bool):
    """(label, topology, slot, [job lists, one per seed])"""
    two = load_topology("two-rack")
    out = []
    for sc in SCENARIOS:
        out.append((sc.replace("proteus-", ""), two, 10.0, [load_workload(sc, seed=s) for s in seeds]))
    tir = SHARED_WORKLOADS / "tiresias_60_job.csv"
    for caps in ("requested", "paper"):
        out.append((f"tiresias-60 ({caps})", two, 1.0,
                    [load_workload(tir, trace_format="tiresias", trace_caps=caps)]))
    for name in BURSTY:
        out.append((name, two, 10.0, [load_workload(name, seed=s) for s in seeds]))
    if not quick:
        philly = load_workload(SHARED_WORKLOADS / "philly.csv", trace_format="philly")
        cluster = load_topology(PHILLY_CLUSTER)
        for start in PHILLY_SLICES:
            out.append((f"philly {start // 1000}k+2k", cluster, 60.0,
                        [philly_slice(philly, start, PHILLY_SLICE_JOBS)]))
    return out


def avg_jct(policy: str, topo, slot: float, job_lists, seeds, network: bool, **kw) -> float:
    vals = []
    for jobs, seed in zip(job_lists, seeds):
        pol = make_policy(policy, seed=seed, **kw)
        vals.append(simulate(topo, jobs, pol, slot=slot, network=network).avg_jct)
    return statistics.mean(vals)


def main() -> int:
    ap = harness.parser(__doc__, quick="leave out the Philly slices", json_out=False)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--plot", default=None, help="PNG: sluice's JCT against the best other")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.perf_counter()
    table = {}
    cells = workloads(seeds, args.quick)
    print(f"average JCT (s); seeds {seeds} for generated workloads; bold = lowest in the row")
    print("| workload | world | " + " | ".join(POLICIES) + " | sluice / best other |")
    print("|---|---|" + "---:|" * (len(POLICIES) + 1))
    for label, topo, slot, job_lists in cells:
        for world in WORLDS:
            net = world != "ideal"
            row = {p: avg_jct(p, topo, slot, job_lists, seeds, net) for p in POLICIES}
            table[label, world] = row
            best = min(row.values())
            other = min(v for p, v in row.items() if p != "sluice")
            cells_txt = [f"**{row[p]:,.0f}**" if row[p] == best else f"{row[p]:,.0f}"
                         for p in POLICIES]
            print(f"| {label} | {world} | " + " | ".join(cells_txt)
                  + f" | {row['sluice'] / other:.2f} |", flush=True)

    print("\nsluice with a log-normal error on the sizes it sees (jobs run their true time)")
    print("| workload | world | sluice exact | sigma 0.5 | sigma 1.0 | las | best other "
          "| gain kept at 0.5 | gain kept at 1.0 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, topo, slot, job_lists in cells:
        for world in WORLDS:
            net = world != "ideal"
            row = table[label, world]
            other = min(v for p, v in row.items() if p != "sluice")
            noisy = [avg_jct("sluice", topo, slot, job_lists, seeds, net, estimate_error=s)
                     for s in (0.5, 1.0)]
            gain = other - row["sluice"]
            kept = [f"{(other - v) / gain:.0%}" if gain > 0 else "-" for v in noisy]
            print(f"| {label} | {world} | {row['sluice']:,.0f} | {noisy[0]:,.0f} | "
                  f"{noisy[1]:,.0f} | {row['las']:,.0f} | {other:,.0f} | {kept[0]} | "
                  f"{kept[1]} |", flush=True)
    if args.plot:
        plot(table, Path(args.plot))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


def plot(table, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = list(table)
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.5))
    for k, p in enumerate(POLICIES[1:]):
        xs = [table[r][p] / table[r]["sluice"] for r in rows]
        ax.scatter(xs, range(len(rows)), label=p, s=18, marker="os^vD<"[k % 6])
    ax.axvline(1.0, color="k", lw=1)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)), [f"{w[0]} / {w[1]}" for w in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("policy's average JCT / sluice's (> 1: sluice better)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
