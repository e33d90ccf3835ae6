"""The ``aged`` rule's constant against the models: each candidate's predicted mean JCT,
p95 and worst size bucket on the heavy-tail mix, against the predicted baselines (no
fabric).

    .venv/bin/python -m bench.fabric.model_aging [--seeds 1,2,3,4,5] [--loads 0.7,0.9] [--per-s-kb 0,15,30,45,75]

For each load and seed, the experiment's mix (``mininet_tests.heavy_tail.mix`` with the
experiment's defaults: jobs, scale, bytes, the profiled compute, the 12 Mbit/s uplinks)
and every mode through the exchange model as the experiment predicts it
(``heavy_tail.predict.model_jobs``: per job JCT and start-up, an idle RTT of 1 ms) and
the fluid model's mean (``fluid.simulate`` with the exchange model's mean start-up of
``off``). A candidate is the ``aged`` rule at ``--per-s-kb`` kB per second of
registration time (0: plain ``remaining``; the uplink moves 1,500 kB/s), on the deep FIFO
and on the fair queue. Figures
are the checker's (``mininet_tests.check_bounds``): each paired per seed against the
baseline, median over seeds; the hardest baseline is the one the candidate's mean JCT
gains least against; a size bucket counts when at least three seeds have it. The last
column is the exchange model's mean start-up (arrival to the first batch after
``kv.init``'s) of the small, medium and large jobs over every seed.
"""

from __future__ import annotations

import statistics

from bench import harness
from mininet_fabric import baselines as bl
from mininet_tests import fluid
from mininet_tests.heavy_tail import host_tagging
from mininet_tests.heavy_tail.config import BYTES_LO, JOBS, SCALE, UPLINK_MBPS, HeavyTailConfig
from mininet_tests.heavy_tail.fabric_setup import experiment_topology
from mininet_tests.heavy_tail.measure import bucket_edges, bucket_of, p95
from mininet_tests.heavy_tail.mix import heavy_tail_mix
from mininet_tests.heavy_tail.predict import alone_s, fluid_jobs, model_jobs, profile_compute_s
from sluice_common import job_rank, rank_rules
from sluice_common.rank_rules import ORDER, RankRule

BASELINES = bl.names()
RTT_S = 0.001
MIN_BUCKET_SEEDS = 3


def candidate(per_s_kb: float) -> str:
    """The rule name of a candidate constant, registered on first use (the shipped one:
    ``aged``)."""
    if per_s_kb == 0:
        return "remaining"
    if per_s_kb * 1e3 == job_rank.AGING_BYTES_PER_S:
        return "aged"
    name = f"aged-{per_s_kb:g}kbs"
    if name not in rank_rules.names():
        rank_rules.register(RankRule(
            name, f"aged, {per_s_kb:g} kB/s", ORDER,
            key=lambda j, k=per_s_kb * 1e3: (job_rank.aged_bytes(j, k), j.order, j.job)))
    return name


def seed_figures(mix, capacity: float, modes: list[str], workload, edges) -> dict[str, dict]:
    """mode -> the models' figures of one seed's mix."""
    out = {}
    off_startup = None
    for mode in modes:
        jct, started = model_jobs(mix, capacity, mode, RTT_S, workload)
        buckets: dict[str, list[float]] = {}
        starts: dict[str, list[float]] = {}
        for j in mix:
            b = bucket_of(j, edges)
            buckets.setdefault(b, []).append(jct[j.name] / alone_s(j, capacity))
            starts.setdefault(b, []).append(started.get(j.name, 0.0))
        out[mode] = {"mean": fluid.mean(jct.values()), "p95": p95(list(jct.values())),
                     "slowdown": {b: statistics.fmean(v) for b, v in buckets.items()},
                     "startup": {b: statistics.fmean(v) for b, v in starts.items()}}
        if mode == "off":
            off_startup = fluid.mean(started.values())
    fjobs = fluid_jobs(mix, capacity)
    for mode in modes:
        rule, baseline = bl.split_mode(mode, rank_rules.names())
        extra = {}
        if bl.baseline(baseline).host_rules is not None:
            rule, extra["attained_thresholds"] = "attained", bl.pias_thresholds(workload)
        pred = fluid.simulate(fjobs, rule or "off", capacity, dt=0.02,
                              startup_s=off_startup or 0.0, levels=8, **extra)
        out[mode]["fluid_mean"] = fluid.mean(pred.values())
    return out


def _pct(a: float, b: float) -> float:
    return 100 * (a / b - 1)


def paired(per_seed: list[dict], mode: str, base: str, field: str) -> float:
    return statistics.median(_pct(s[mode][field], s[base][field]) for s in per_seed)


def worst_bucket(per_seed: list[dict], mode: str, base: str) -> tuple[float, str]:
    """(the worst bucket's slowdown change against ``base``, that bucket)."""
    per: dict[str, list[float]] = {}
    for s in per_seed:
        for b, v in s[mode]["slowdown"].items():
            per.setdefault(b, []).append(_pct(v, s[base]["slowdown"][b]))
    judged = {b: statistics.median(v) for b, v in per.items() if len(v) >= MIN_BUCKET_SEEDS}
    b = max(judged, key=judged.get)
    return judged[b], b


def startup_by_bucket(per_seed: list[dict], mode: str) -> dict[str, float]:
    per: dict[str, list[float]] = {}
    for s in per_seed:
        for b, v in s[mode]["startup"].items():
            per.setdefault(b, []).append(v)
    return {b: statistics.fmean(v) for b, v in per.items()}


def row(per_seed: list[dict], mode: str) -> dict:
    vs = {b: paired(per_seed, mode, b, "mean") for b in BASELINES}
    hardest = max((b for b in BASELINES if b != "off"), key=vs.get)
    worst, bucket = worst_bucket(per_seed, mode, hardest)
    return {"mode": mode, "mean_s": statistics.fmean(s[mode]["mean"] for s in per_seed),
            "vs_off": vs["off"], "vs_fair": vs["off-fair"], "vs_pias": vs["pias"],
            "hardest": hardest, "vs_hardest": vs[hardest],
            "p95_vs_hardest": paired(per_seed, mode, hardest, "p95"),
            "worst_bucket": worst, "bucket": bucket,
            "fluid_vs_fair": paired(per_seed, mode, "off-fair", "fluid_mean"),
            "startup": startup_by_bucket(per_seed, mode)}


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--seeds", default="1,2,3,4,5", help="the mixes' seeds (default 1,2,3,4,5)")
    ap.add_argument("--loads", default="0.7,0.9", help="offered loads (default 0.7,0.9)")
    ap.add_argument("--per-s-kb", default="0,15,30,45,75",
                    help="candidate constants, kB per second of registration time "
                         "(default 0,15,30,45,75; 0: remaining)")
    ap.add_argument("--fifo-only", action="store_true",
                    help="each candidate on the deep FIFO only (default: on the fair "
                         "queue too)")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rules = [candidate(float(x)) for x in args.per_s_kb.split(",")]
    modes = [*BASELINES, *rules, *(() if args.fifo_only else (f"{r}+off-fair" for r in rules))]
    _, capacity = experiment_topology(UPLINK_MBPS)
    compute_s = profile_compute_s()
    edges = bucket_edges(10 * SCALE * BYTES_LO)
    for load in (float(x) for x in args.loads.split(",")):
        workload = host_tagging.workload_of(HeavyTailConfig(load=load))
        per_seed = [seed_figures(heavy_tail_mix(seed, load, capacity, jobs=JOBS, scale=SCALE,
                                                bytes_lo=BYTES_LO, compute_s=compute_s),
                                 capacity, modes, workload, edges) for seed in seeds]
        print(f"\nload {load}, seeds {args.seeds}\n")
        print("| mode | mean JCT, mean of seeds (s) | vs off | vs off-fair | vs pias | hardest | p95 vs "
              "hardest | worst bucket vs hardest | fluid vs off-fair | start-up s/m/l (s) |")
        print("|---|---:|---:|---:|---:|---|---:|---:|---:|---|")
        for mode in modes:
            r = row(per_seed, mode)
            st = " / ".join(f"{r['startup'][b]:.2f}" for b in ("small", "medium", "large")
                            if b in r["startup"])
            print(f"| {mode} | {r['mean_s']:.2f} | {r['vs_off']:+.1f} % | {r['vs_fair']:+.1f} % | "
                  f"{r['vs_pias']:+.1f} % | {r['hardest']} | {r['p95_vs_hardest']:+.1f} % | "
                  f"{r['worst_bucket']:+.1f} % ({r['bucket']}) | {r['fluid_vs_fair']:+.1f} % | "
                  f"{st} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
