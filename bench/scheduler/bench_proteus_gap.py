"""Why lyapunov / single misses the paper's 0.4-0.5: the evidence behind
bench/results/proteus-gap.md, for both readings of k (proteus.K_READINGS).

For each Proteus scenario (seeds given) and topology it prints:
  * ly/single and ly/random (geometric mean over the seeds), mean GPUs given;
  * bound: sum of min_n C(n) / sum of C(1), every job alone on the empty cluster —
    the best any GPU-count policy can do against single when nobody queues;
  * slower%: share of lyapunov's starts at a count whose C(n) exceeds the best C(n)
    among the counts it could have taken at that moment (free GPUs, max_gpus);
  * below%: share of jobs started on fewer GPUs than their best count on an empty
    cluster (the GPUs were busy and the decision did not wait);
  * wait / run split of lyapunov's average JCT; single's average wait;
  * GPU-seconds of random relative to single (communication inflates the work).
and draws bench/plots/proteus_queues_<caps>.png: Q and Z over time, seed 0, both readings.

    .venv/bin/python -m bench.scheduler.bench_proteus_gap [--seeds 0,1,2,3,4] [--topologies two-rack,leaf-spine]
                                                [--caps paper|mixed] [--plot PNG]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from job_scheduler.core import policies, proteus  # noqa: E402
from job_scheduler.core.policies import make_policy  # noqa: E402
from job_scheduler.simulation.simulator import Simulator, simulate  # noqa: E402
from job_scheduler.simulation.workloads import SCENARIO_CAPS, SCENARIOS, load_workload  # noqa: E402
from topologies import load_topology  # noqa: E402

from bench.scheduler.bench_proteus import SLOT, no_queueing_bound  # noqa: E402
import os  # noqa: E402

from bench import harness

# The figures of this bench in bench/RESULTS.md use the P100-derived profile, the GPU class
# the Proteus scenarios are sized for (the commands' default is the measured H100);
# SLUICE_PROFILE=h100 (or a profile file) re-runs them on another.
os.environ.setdefault("SLUICE_PROFILE", "p100")


class CountAudit:
    """Wraps proteus.decide as the policy calls it; records C(n) / best free C."""

    def __init__(self):
        self.ratios: list[float] = []
        self._orig = proteus.decide

    def __enter__(self):
        def spy(costs, cost1, Q, Z, V, free, max_gpus, k="gpus"):
            n = self._orig(costs, cost1, Q, Z, V, free, max_gpus, k)
            if n:
                free_costs = [c for m, c in costs.items() if m <= min(free, max_gpus)]
                self.ratios.append(costs[n] / min(free_costs))
            return n
        proteus.decide = spy       # LyapunovState.decide calls it as proteus.decide
        return self

    def __exit__(self, *exc):
        proteus.decide = self._orig


def scenario_row(topo, sc, seeds, k, caps):
    rs, rr, gpus, wait, jct, swait, inflate, bound = [], [], [], [], [], [], [], []
    below = total = 0
    with CountAudit() as audit:
        for seed in seeds:
            jobs = load_workload(sc, seed=seed, caps=caps)
            sim = Simulator(topo, jobs, make_policy("lyapunov", k=k), slot=SLOT)
            ly = sim.run()
            for job, model, got in zip(sim.jobs, sim.models, ly.gpus):
                c = {n: model.C(n, sim.reference_bandwidth(n))
                     for n in range(1, min(job.max_gpus, topo.total_gpus) + 1)}
                below += got < min(c, key=c.get)
                total += 1
            si = simulate(topo, jobs, make_policy("single"), slot=SLOT)
            ra = simulate(topo, jobs, make_policy("random", seed=seed), slot=SLOT)
            rs.append(ly.avg_jct / si.avg_jct)
            rr.append(ly.avg_jct / ra.avg_jct)
            gpus.append(statistics.mean(ly.gpus))
            wait.append(ly.avg_wait)
            jct.append(ly.avg_jct)
            swait.append(si.avg_wait)
            inflate.append((ra.gpu_util * ra.makespan) / (si.gpu_util * si.makespan))
            bound.append(no_queueing_bound(topo, jobs))
    slower = sum(r > 1 + 1e-9 for r in audit.ratios) / len(audit.ratios)
    J, W = statistics.mean(jct), statistics.mean(wait)
    return (f"{sc.replace('proteus-', ''):<19} {k:<4} {statistics.geometric_mean(rs):>9.2f} "
            f"{statistics.mean(bound):>5.2f} {statistics.geometric_mean(rr):>9.2f} "
            f"{statistics.mean(gpus):>5.2f} {100 * slower:>7.0f}% {max(audit.ratios):>7.1f} "
            f"{100 * below / total:>6.0f}% "
            f"{J:>7.0f} {W:>6.0f} {statistics.mean(swait):>7.0f} "
            f"{statistics.mean(inflate):>7.2f}")


def queue_plot(topo, out: Path, caps: str) -> None:
    fig, axes = plt.subplots(2, 4, figsize=(15, 6), sharex="col")
    for col, sc in enumerate(SCENARIOS):
        jobs = load_workload(sc, seed=0, caps=caps)
        for k, style in (("job", "-"), ("gpus", "--")):
            pol = make_policy("lyapunov", k=k)
            simulate(topo, jobs, pol, slot=SLOT)
            t = [x[0] / 3600 for x in pol.trace]
            axes[0, col].plot(t, [x[1] for x in pol.trace], style, lw=0.8, label=f"k={k}")
            axes[1, col].plot(t, [x[2] for x in pol.trace], style, lw=0.8, label=f"k={k}")
        axes[0, col].set_title(sc.replace("proteus-", ""), fontsize=9)
        axes[1, col].set_xlabel("time (h)")
        for row in (0, 1):
            axes[row, col].set_yscale("symlog", linthresh=100)
    axes[0, 0].set_ylabel("Q (s of 1-GPU work)")
    axes[1, 0].set_ylabel("Z (s)")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"Lyapunov queues on {topo.name}, caps={caps}, seed 0, V={policies.DEFAULT_V:g}, "
                 f"eps={policies.DEFAULT_EPS:g}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--topologies", default="two-rack,leaf-spine")
    ap.add_argument("--caps", choices=SCENARIO_CAPS, default="paper",
                    help="scenario max_gpus setting (workloads.SCENARIO_CAPS)")
    ap.add_argument("--plot", default=None,
                    help="PNG of Q and Z over time (default bench/plots/proteus_queues_<caps>.png)")
    args = ap.parse_args()
    args.plot = args.plot or f"bench/plots/proteus_queues_{args.caps}.png"
    seeds = [int(s) for s in args.seeds.split(",")]
    for name in args.topologies.split(","):
        topo = load_topology(name)
        print(f"\n{name} ({topo.total_gpus} GPUs), caps={args.caps}, slot {SLOT:g} s, V={policies.DEFAULT_V:g}, "
              f"eps={policies.DEFAULT_EPS:g}, seeds {seeds}")
        print(f"{'scenario':<19} {'k':<4} {'ly/single':>9} {'bound':>5} {'ly/random':>9} "
              f"{'GPUs':>5} {'slower':>8} {'worst':>7} {'below':>7} {'ly JCT':>7} {'wait':>6} "
              f"{'1-wait':>7} {'rnd GPUs':>7}")
        for sc in SCENARIOS:
            for k in proteus.K_READINGS:
                print(scenario_row(topo, sc, seeds, k, args.caps), flush=True)
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        queue_plot(load_topology("two-rack"), Path(args.plot), args.caps)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
