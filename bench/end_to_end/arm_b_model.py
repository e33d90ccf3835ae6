"""Why ``sluice demo``'s arm b (Slurm's order and nodes, sluice's flow priority) gains so
little over arm a (the same, a FIFO network): the exchange model's prediction of both
arms over many workload draws, no fabric, with the fact behind it for each draw: how many
pairs of arm a's jobs cross a common link while both run. Priority reorders packets only
on a link that two jobs share; a draw with no such pair cannot gain from it.

    .venv/bin/python -m bench.end_to_end.arm_b_model --seeds 2000-2039 [--topology NAME]

Each draw is the demo's own (``end_to_end.workload_draw``, the same ``DrawSpec``), each
arm's plan its dry run (``end_to_end.demo_arms.predictions``, what the demo predicts
before its passes). The verdict on arm b is the demo's live runs (bench/RESULTS.md); this
reads the model across draws, where live runs would take four minutes a draw.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from itertools import combinations, pairwise

GAIN_BOUND_PCT = -15.0      # the demo's bound: arm b at least 15 % below arm a in average JCT


def job_links(topology, record: dict) -> frozenset:
    """The links (as sorted host/switch name pairs) a job's worker-server exchange crosses;
    empty for a job whose workers share its parameter server's host."""
    return frozenset(tuple(sorted(e)) for w in record["worker_hosts"] for p in record["ps_hosts"]
                     for e in pairwise(topology.path(w, p)))


def sharing_pairs(topology, records: list[dict], finish: dict[str, float]) -> list[tuple]:
    """Pairs ``(a, b, links)`` of jobs whose runs (start to predicted finish) overlap and
    whose exchanges cross a common link. Pure."""
    runs = [(r["name"], r["start"], finish[r["name"]], job_links(topology, r))
            for r in records if r["name"] in finish]
    return [(a, b, la & lb) for (a, sa, ea, la), (b, sb, eb, lb) in combinations(runs, 2)
            if sa < eb and sb < ea and la & lb]


def read_draw(topology, config, seed: int, spec) -> dict:
    """One draw: the model's average JCT in arms a and b, and arm a's layout facts."""
    from end_to_end.arms import ARMS
    from end_to_end.demo_arms import predictions, workload

    jobs = workload(topology, config, seed, spec).jobs
    planned, predicted = predictions(topology, jobs, config, [ARMS["a"], ARMS["b"]])
    avg = {k: statistics.fmean(predicted[k].values()) for k in ("a", "b")}
    records = planned["a"]
    finish = {r["name"]: r["arrival"] + predicted["a"][r["name"]]
              for r in records if r["name"] in predicted["a"]}
    racks = {h.name: h.rack for h in topology.hosts}
    return {"seed": seed, "avg_a_s": avg["a"], "avg_b_s": avg["b"],
            "b_vs_a_pct": 100.0 * (avg["b"] / avg["a"] - 1.0),
            "jobs": len(records),
            "networked": sum(1 for r in records if job_links(topology, r)),
            "cross_rack": sum(1 for r in records
                              if len({racks[h] for h in r["worker_hosts"] + r["ps_hosts"]}) > 1),
            "sharing_pairs": len(sharing_pairs(topology, records, finish))}


def summary(rows: list[dict]) -> str:
    gains = sorted(r["b_vs_a_pct"] for r in rows)
    k = len(gains)
    met = sum(1 for g in gains if g <= GAIN_BOUND_PCT)
    no_pair = sum(1 for r in rows if r["sharing_pairs"] == 0)
    return (f"{k} draws: arm b vs arm a (model) min {gains[0]:+.1f} %, median "
            f"{statistics.median(gains):+.1f} %, max {gains[-1]:+.1f} %; at or below "
            f"{GAIN_BOUND_PCT:+.0f} % in {met} of {k}; no two jobs sharing a link while both "
            f"run in {no_pair} of {k}")


def parse_seeds(text: str) -> list[int]:
    """``2000-2039`` or ``1,5,9``."""
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-", 1))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    from end_to_end import run
    from end_to_end.cli import configure_demo, run_config
    from end_to_end.workload_draw import DrawSpec
    from topologies import load_topology

    parser = argparse.ArgumentParser(prog="python -m bench.end_to_end.arm_b_model",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="2000-2039", help="workload seeds: LO-HI or a,b,c")
    parser.add_argument("--topology", default=run.DEMO_TOPOLOGY,
                        help=f"built-in name or YAML (default the demo's, {run.DEMO_TOPOLOGY})")
    configure_demo(parser)
    args = parser.parse_args(argv)
    config = run_config(args, jobs=str(run.DEMO_JOBS), topology=args.topology)
    topology = load_topology(config.topology)
    spec = DrawSpec(jobs=args.workload_jobs or DrawSpec().jobs)
    rows = []
    print("seed  avg a s  avg b s  b vs a  jobs  networked  cross-rack  sharing pairs")
    for seed in parse_seeds(args.seeds):
        r = read_draw(topology, config, seed, spec)
        rows.append(r)
        print(f"{seed:>4}  {r['avg_a_s']:7.2f}  {r['avg_b_s']:7.2f}  {r['b_vs_a_pct']:+6.1f} %"
              f"  {r['jobs']:>4}  {r['networked']:>9}  {r['cross_rack']:>10}  "
              f"{r['sharing_pairs']:>13}", flush=True)
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
