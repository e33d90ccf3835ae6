"""The Proteus reproduction and the Tiresias comparison, through the simulator.

(a) the four Proteus scenarios on two-rack: average turnaround of lyapunov / single and
    lyapunov / random (paper: ~0.4-0.5 and ~0.7), several seeds, plus what the Lyapunov
    queues did (mean Q, mean Z, mean GPUs given) to explain the differences; for each
    setting of the scenarios' max_gpus in ``--caps`` (workloads.SCENARIO_CAPS: "paper" =
    8 for every job, the default; "mixed" = 1/2/4/8 per job, kept for comparison);
(b) tiresias_60_job.csv on two-rack: lyapunov vs fifo vs las, with our network model,
    with every policy on Liquid best fit, and with the network switched off (the
    Tiresias simulator's assumption: 215.9 s FIFO, 190.7 s 2D-LAS);
(c) --sweep: the V x eps grid behind the defaults in policies.py (same seeds).

``--k job|gpus`` picks the reading of k in k*Cost_i(1) (proteus.served_work; default
policies.DEFAULT_K). The "bound" column is what any GPU-count policy could reach against
single with no queueing at all: every job alone on the empty cluster at its fastest
n <= max_gpus, sum of C(n*) / sum of C(1) (single hardly queues in these scenarios).

    .venv/bin/python -m bench.scheduler.bench_proteus [--seeds 0,1,2] [--k job] [--caps paper,mixed]
                                            [--sweep] [--plots bench/plots]
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from job_scheduler.core.policies import DEFAULT_EPS, DEFAULT_K, DEFAULT_V, make_policy  # noqa: E402
from job_scheduler.simulation.simulator import Simulator, simulate  # noqa: E402
from job_scheduler.simulation.workloads import SCENARIO_CAPS, SCENARIOS, load_workload  # noqa: E402
from topologies import load_topology  # noqa: E402
from job_scheduler.simulation.workloads import SHARED_WORKLOADS  # noqa: E402
import os  # noqa: E402

from bench import harness

# The figures of this bench in bench/RESULTS.md use the P100-derived profile, the GPU class
# the Proteus scenarios are sized for (the commands' default is the measured H100);
# SLUICE_PROFILE=h100 (or a profile file) re-runs them on another.
os.environ.setdefault("SLUICE_PROFILE", "p100")

TIRESIAS = SHARED_WORKLOADS / "tiresias_60_job.csv"
SLOT = 10.0
K = DEFAULT_K           # set from --k in main()


def policy(name, **kw):
    """make_policy with the reading of k chosen on the command line for lyapunov."""
    if name == "lyapunov":
        kw.setdefault("k", K)
    return make_policy(name, **kw)


def no_queueing_bound(topo, jobs) -> float:
    """sum over jobs of min_n C(n) alone on the empty cluster / sum of C(1)."""
    sim = Simulator(topo, jobs, make_policy("single"), slot=SLOT)
    best = one = 0.0
    for job, model in zip(sim.jobs, sim.models):
        best += min(model.C(n, sim.reference_bandwidth(n))
                    for n in range(1, min(job.max_gpus, topo.total_gpus) + 1))
        one += model.cost1
    return best / one


def gmean(xs):
    return statistics.geometric_mean(xs)


def scenarios(topo, seeds, caps: str) -> dict[str, tuple[float, float]]:
    print(f"(a) Proteus scenarios on {topo.name}, caps={caps}, slot {SLOT:g} s, "
          f"V={DEFAULT_V:g}, eps={DEFAULT_EPS:g}, k={K}; average JCT (s), mean over seeds {seeds}")
    print(f"{'scenario':<28} {'lyapunov':>9} {'single':>9} {'random':>9} {'fifo':>9} {'las':>9}"
          f"  {'ly/single':>9} {'(range)':>11} {'bound':>5} {'ly/random':>9}  {'mean Q':>8} "
          f"{'mean Z':>8} {'GPUs':>5}")
    ratios = {}
    for sc in SCENARIOS:
        jct = {p: [] for p in ("lyapunov", "single", "random", "fifo", "las")}
        qs, zs, gpus, bound = [], [], [], []
        for seed in seeds:
            jobs = load_workload(sc, seed=seed, caps=caps)
            bound.append(no_queueing_bound(topo, jobs))
            for p in jct:
                pol = policy(p, seed=seed)
                r = simulate(topo, jobs, pol, slot=SLOT)
                jct[p].append(r.avg_jct)
                if p == "lyapunov":
                    qs.append(statistics.mean(q for _, q, _ in pol.trace))
                    zs.append(statistics.mean(z for _, _, z in pol.trace))
                    gpus.append(statistics.mean(r.gpus))
        m = {p: statistics.mean(v) for p, v in jct.items()}
        rs = [l / s for l, s in zip(jct["lyapunov"], jct["single"])]
        rr = [l / s for l, s in zip(jct["lyapunov"], jct["random"])]
        ratios[sc] = (gmean(rs), gmean(rr))
        print(f"{sc:<28} {m['lyapunov']:>9.0f} {m['single']:>9.0f} {m['random']:>9.0f} "
              f"{m['fifo']:>9.0f} {m['las']:>9.0f}  {ratios[sc][0]:>9.2f} "
              f"{f'({min(rs):.2f}-{max(rs):.2f})':>11} "
              f"{statistics.mean(bound):>5.2f} {ratios[sc][1]:>9.3f}"
              f"  {statistics.mean(qs):>8.0f} {statistics.mean(zs):>8.0f} "
              f"{statistics.mean(gpus):>5.2f}", flush=True)
    return ratios


def ratio_plot(topo, seeds, by_caps: dict[str, dict[str, tuple[float, float]]],
               out: Path) -> None:
    """lyapunov / single and lyapunov / random per scenario, one bar pair per caps setting."""
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    x = range(len(SCENARIOS))
    width = 0.8 / (2 * len(by_caps))
    colours = {"paper": ("tab:blue", "tab:orange"), "mixed": ("lightsteelblue", "navajowhite")}
    i = 0
    for caps, ratios in by_caps.items():
        for which, label in ((0, "lyapunov / single"), (1, "lyapunov / random")):
            offset = (i - (2 * len(by_caps) - 1) / 2) * width
            ax.bar([v + offset for v in x], [ratios[s][which] for s in SCENARIOS], width,
                   color=colours.get(caps, ("grey", "silver"))[which],
                   label=f"{label}, caps={caps}")
            i += 1
    ax.axhspan(0.4, 0.5, color="tab:blue", alpha=0.12, label="paper vs single (~0.4-0.5)")
    ax.axhline(0.7, color="tab:orange", ls="--", lw=1, label="paper vs random (~0.7)")
    ax.set_xticks(list(x), [s.replace("proteus-", "") for s in SCENARIOS])
    ax.set_ylabel("average JCT ratio (lower = lyapunov better)")
    ax.set_title(f"Proteus scenarios on {topo.name} (seeds {seeds}, k={K})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def tiresias(topo) -> None:
    jobs = load_workload(TIRESIAS, trace_format="tiresias")
    print(f"\n(b) {TIRESIAS.name} on {topo.name}, slot 1 s (Tiresias simulator, no network: "
          "FIFO 215.9 s, 2D-LAS 190.7 s)")
    print(f"{'setting':<34} {'lyapunov':>9} {'fifo':>9} {'las':>9} {'single':>9}")
    for label, kw in (("network model, own placements", {}),
                      ("network model, all on best fit", {"placement": "best-fit"}),
                      ("no network (engine check)", {"network": False})):
        row = []
        for p in ("lyapunov", "fifo", "las", "single"):
            pol = policy(p, placement=kw.get("placement"))
            row.append(simulate(topo, jobs, pol, slot=1.0, network=kw.get("network", True)).avg_jct)
        print(f"{label:<34} " + " ".join(f"{v:>9.1f}" for v in row), flush=True)


def sweep(topo, seeds, caps: str) -> None:
    print(f"\n(c) V x eps sweep (k={K}, caps={caps}, seeds {seeds}, slot {SLOT:g} s): lyapunov/single and "
          "lyapunov/random per scenario (geometric mean over the seeds); Tiresias-60 "
          "lyapunov average JCT (s)")
    work = {(sc, s): load_workload(sc, seed=s, caps=caps) for sc in SCENARIOS for s in seeds}
    base = {key: {p: simulate(topo, w, make_policy(p, seed=key[1]), slot=SLOT).avg_jct
                  for p in ("single", "random")} for key, w in work.items()}
    tiresias_jobs = load_workload(TIRESIAS, trace_format="tiresias")
    for V in (1e2, 1e3, 1e4, 1e5):
        for eps in (600.0, 6000.0, 60000.0):
            cells = []
            for sc in SCENARIOS:
                rs, rr = [], []
                for s in seeds:
                    r = simulate(topo, work[sc, s], policy("lyapunov", V=V, eps=eps),
                                 slot=SLOT).avg_jct
                    rs.append(r / base[sc, s]["single"])
                    rr.append(r / base[sc, s]["random"])
                cells.append(f"{gmean(rs):.2f}/{gmean(rr):.2f}")
            t = simulate(topo, tiresias_jobs, policy("lyapunov", V=V, eps=eps), slot=SLOT).avg_jct
            print(f"V={V:<8g} eps={eps:<8g} " + "  ".join(cells) + f"  {t:.0f}", flush=True)


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--topology", default="two-rack")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--plots", default=None, help="directory for proteus_ratios.png")
    ap.add_argument("--k", choices=("job", "gpus"), default=DEFAULT_K,
                    help="reading of k in k*Cost_i(1) for lyapunov (proteus.served_work)")
    ap.add_argument("--caps", default=",".join(SCENARIO_CAPS),
                    help="scenario max_gpus settings to run, comma-separated "
                         f"({', '.join(SCENARIO_CAPS)})")
    args = ap.parse_args()
    global K
    K = args.k
    caps_list = [c.strip() for c in args.caps.split(",") if c.strip()]
    if not caps_list or any(c not in SCENARIO_CAPS for c in caps_list):
        ap.error(f"--caps: choose from {', '.join(SCENARIO_CAPS)}")
    topo = load_topology(args.topology)
    plots = Path(args.plots) if args.plots else None
    if plots:
        plots.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    seeds = [int(s) for s in args.seeds.split(",")]
    by_caps = {}
    for caps in caps_list:
        by_caps[caps] = scenarios(topo, seeds, caps)
        print()
    if plots:
        ratio_plot(topo, seeds, by_caps, plots / "proteus_ratios.png")
    tiresias(topo)
    if args.sweep:
        sweep(topo, seeds, caps_list[0])   # the first of --caps
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
