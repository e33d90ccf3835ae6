"""Priority off vs on on a shared, oversubscribed rack uplink (two-rack, real PS jobs).

    .venv/bin/python -m mininet_tests.experiment_priority [--reps 3] [--mix one-late|two-late]
        [--rank progress] [--out DIR]
    .venv/bin/python -m mininet_tests.experiment_priority --mix heavy-tail|same-start
        [--load 0.7] [--seeds 5] [--baselines none|all] [--cc machine|bbr|cubic] [--out DIR]
        # see mininet_tests/experiment_heavy_tail.py

Three smallcnn jobs (0.42M parameters, 1.7 MB pushed and pulled per worker per batch,
~0.1 s of compute: communication-bound on the emulated fabric) have their parameter
server in rack 1 (h1, h2) and both workers in rack 2 (h3, h4), so every push crosses
tor2's 50 Mbit/s uplink and every pull tor1's. Placements are fixed (the scheduler is
bypassed so both modes see exactly the same placement), seeds too. Arrivals are
staggered: job-a at 0 s, job-b at 3 s, and job-c, shorter, at 15 s: job-c is the
lagging job (lowest batch numbers while it runs) that progress-aware priority favours.
``--mix two-late``: one long job at 0 s, two short ones at 8 s and 16 s.

Each repetition runs priority off then on on the same controller and fabric (one
bring-up for the whole experiment); the table reports medians over the repetitions of
the average JCT and of job-c's mean iteration time, and the plots show per-job median
JCT and job-c's iteration times in the first repetition.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sluice_common.job_rank import RANK_RULES  # noqa: E402
from mininet_fabric import baselines as bl  # noqa: E402
from job_scheduler.core.estimator import Estimator, nominal_bandwidth  # noqa: E402
from sluice_common.jobspec import JobSpec  # noqa: E402
from job_scheduler.core.decisions import StartDecision  # noqa: E402
from sluice_common.placement import Placement  # noqa: E402
from end_to_end.report import comparison, write_report  # noqa: E402
from end_to_end.run import environment  # noqa: E402
from end_to_end.runloop import RealTimeRun, RunOptions  # noqa: E402
from topologies import load_topology  # noqa: E402

LAGGING = "job-c"
# heavy-tail: batches 10..1000 x 0.1 = 1..100, bytes per batch 150 kB..1.5 MB, 16 jobs,
# rack uplinks shaped at 12 Mbit/s, so that one seed (four modes) fits in 8 minutes here.
# Why 12 Mbit/s and not the topology's 50: on 2 cores the jobs' ps-lite processes and the
# userspace datapath carry only ~12 Mbit/s in all, so at 50 the CPU, not the link, is the
# bottleneck and no ranking rule can change anything (bench/HISTORY.md, round 5: 11.9 of
# 50 Mbit/s used, every rule within 5 % of off). At 12 Mbit/s the link is the bottleneck
# the experiment is about. Every link is scaled alike (experiment_heavy_tail).
HEAVY_TAIL_SCALE = 0.1
HEAVY_TAIL_BYTES_LO = 150_000
HEAVY_TAIL_JOBS = 16
HEAVY_TAIL_UPLINK_MBPS = 12.0


def jobs(batches_long: int, batches_short: int, mix: str = "one-late") -> list[JobSpec]:
    """one-late (default): job-a, job-b long at 0 s / 3 s, job-c short at 15 s.
    two-late: job-a long at 0 s, job-b and job-c short at 8 s / 16 s."""
    def spec(name, arrival, batches):
        return JobSpec(name=name, model="smallcnn", dataset_size=32 * 2 * batches, epochs=1,
                       batch_size=32, max_gpus=2, arrival=arrival)
    if mix == "two-late":
        return [spec("job-a", 0.0, batches_long), spec("job-b", 8.0, batches_short),
                spec(LAGGING, 16.0, batches_short)]
    return [spec("job-a", 0.0, batches_long), spec("job-b", 3.0, batches_long),
            spec(LAGGING, 15.0, batches_short)]


PLACEMENTS = {"job-a": (("h1",), ("h3", "h4")), "job-b": (("h2",), ("h3", "h4")),
              LAGGING: (("h1",), ("h3", "h4"))}


def fixed_placement_step(queued, state, now):
    """Start every queued job at once on its fixed placement (PS rack 1, workers rack 2)."""
    out = []
    for q in queued:
        ps, workers = PLACEMENTS[q.spec.name]
        out.append(StartDecision(q.id, Placement(q.spec.name, ps, workers)))
    return out


def median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mininet_tests.experiment_priority",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batches", type=int, default=40, help="batches of job-a and job-b")
    ap.add_argument("--short-batches", type=int, default=15, help="batches of job-c")
    ap.add_argument("--mix", default="one-late",
                    choices=("one-late", "two-late", "heavy-tail", "same-start"),
                    help="arrival pattern (see jobs()); heavy-tail and same-start: "
                         "mininet_tests/experiment_heavy_tail.py")
    ap.add_argument("--rank", default="progress", choices=RANK_RULES,
                    help="one-late/two-late: the rule of the priority-on runs (default progress)")
    ap.add_argument("--load", type=float, default=0.7, help="heavy-tail: offered bottleneck load")
    ap.add_argument("--seeds", type=int, default=5, help="heavy-tail/same-start: seeds 1..N")
    ap.add_argument("--seed-list", type=lambda t: [int(x) for x in t.split(",")], default=None,
                    help="heavy-tail: explicit seeds, e.g. 6,7")
    ap.add_argument("--jobs", type=int, default=HEAVY_TAIL_JOBS,
                    help="heavy-tail: jobs per seed (>= 10)")
    ap.add_argument("--scale", type=float, default=HEAVY_TAIL_SCALE,
                    help="heavy-tail: batches per job are 10..1000 times this")
    ap.add_argument("--bytes-lo", type=int, default=HEAVY_TAIL_BYTES_LO,
                    help="heavy-tail: bytes per batch are log-uniform on [this, 10x this]")
    ap.add_argument("--compute", default="profile", choices=("profile", "share"),
                    help="heavy-tail: compute per batch from the H100 profile (alexnet, "
                         "b=32: communication-dominated) or a 30-70 %% communication share")
    ap.add_argument("--start", default="warm", choices=("warm", "cold"),
                    help="heavy-tail/same-start: PS processes pre-started with MXNet "
                         "imported (warm) or started per job (cold: ~25 s each here)")
    ap.add_argument("--uplink-mbps", type=float, default=None,
                    help="heavy-tail/same-start: shape the rack uplinks at this rate (every "
                         f"link scaled alike; default: {HEAVY_TAIL_UPLINK_MBPS:g} for "
                         "heavy-tail, the topology's 50 Mbit/s for same-start; 0: the "
                         "topology's for both)")
    ap.add_argument("--job-timeout", type=float, default=400.0)
    ap.add_argument("--host-tcp", default="kernel", choices=("kernel", "starved-ok"),
                    help="heavy-tail/same-start: host TCP settings (experiment_heavy_tail.HOST_TCP)")
    ap.add_argument("--baselines", default="none", choices=("none", "all"),
                    help="heavy-tail/same-start: all: also every registered baseline at "
                         f"the switch egresses ({bl.help_text()}), and the default rule on "
                         "each (RULE+BASELINE); the summary names the best baseline "
                         "(mininet_fabric/baselines.py)")
    ap.add_argument("--modes", default=None, metavar="MODE[,MODE...]",
                    help="heavy-tail/same-start: run only these modes (off always), e.g. "
                         "BASELINE,RULE+BASELINE with --baselines all")
    ap.add_argument("--cc", default="machine", choices=("machine", "bbr", "cubic"),
                    help="heavy-tail/same-start: the hosts' TCP congestion control, set in "
                         "each host's network namespace (default: this machine's)")
    ap.add_argument("--resummarize", default=None, metavar="DIR",
                    help="heavy-tail/same-start: recompute DIR's summary from its run reports")
    ap.add_argument("--merge", default=None, metavar="DIR[,DIR...]",
                    help="with --resummarize: add these experiment directories' seeds")
    ap.add_argument("--repredict", action="store_true",
                    help="with --resummarize: the model's predictions again, current constants")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.mix in ("heavy-tail", "same-start"):
        if not 0 < args.load < 1 or args.seeds < 1 or args.jobs < 1:
            ap.error("--load must be in (0, 1); --seeds and --jobs must be >= 1")
        if args.uplink_mbps is None and args.mix == "heavy-tail":
            args.uplink_mbps = HEAVY_TAIL_UPLINK_MBPS
        elif args.uplink_mbps == 0:
            args.uplink_mbps = None          # the topology's own rate
        if args.uplink_mbps is not None and args.uplink_mbps <= 0:
            ap.error(f"--uplink-mbps must be > 0 (or 0: the topology's), got {args.uplink_mbps}")
        from mininet_tests.experiment_heavy_tail import (markdown, modes_for, resummarize,
                                                         run as run_heavy_tail)
        try:          # a bad --modes is refused here, before any fabric is built
            modes_for(args.baselines, args.modes)
        except ValueError as e:
            ap.error(str(e))
        if args.resummarize:
            merge = [Path(d) for d in args.merge.split(",")] if args.merge else []
            print(markdown(resummarize(Path(args.resummarize), args, merge, args.repredict), args))
            return 0
        return run_heavy_tail(args)
    if args.reps < 1 or args.batches < 1 or args.short_batches < 1:
        ap.error("--reps, --batches and --short-batches must be >= 1")
    out = Path(args.out or f"runs/experiment-priority-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    topology = load_topology("two-rack")
    specs = jobs(args.batches, args.short_batches, args.mix)
    estimator = Estimator(nominal_bw_mbps=nominal_bandwidth(topology))
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    started = time.monotonic()
    with environment(topology, "two-rack", out, rank=args.rank) as (fabric, client):
        port = 20000
        for rep in range(args.reps):
            for mode in ("off", "on"):
                print(f"experiment: repetition {rep + 1}/{args.reps}, priority {mode}",
                      file=sys.stderr, flush=True)
                run_dir = out / f"rep{rep + 1}-{mode}"
                options = RunOptions(priority=mode == "on", slot_s=0.5, port_base=port)
                port += 400
                result = RealTimeRun(topology, specs, fixed_placement_step, estimator, fabric,
                                     client, run_dir, options, policy_name="fixed").run()
                write_report(result, run_dir)
                runs[mode].append(result)
    wall = time.monotonic() - started
    cmps = [comparison(off, on, lagging=LAGGING) for off, on in zip(runs["off"], runs["on"])]
    summary = {
        "reps": args.reps, "wall_time_s": round(wall, 1),
        "avg_jct_off_s": median(c["avg_jct_off_s"] for c in cmps),
        "avg_jct_on_s": median(c["avg_jct_on_s"] for c in cmps),
        "lagging_iter_off_s": median(c["lagging_iter_off_s"] for c in cmps),
        "lagging_iter_on_s": median(c["lagging_iter_on_s"] for c in cmps),
        "per_rep": cmps,
        "all_finished": all(r["summary"]["finished"] == len(specs) for rs in runs.values() for r in rs),
    }
    def change(a, b):
        return None if not a or b is None else round(100 * (b - a) / a, 1)
    summary["avg_jct_change_pct"] = change(summary["avg_jct_off_s"], summary["avg_jct_on_s"])
    summary["lagging_iter_change_pct"] = change(summary["lagging_iter_off_s"], summary["lagging_iter_on_s"])
    (out / "experiment.json").write_text(json.dumps(summary, indent=1))

    lines = [f"# Priority off vs on: 3 smallcnn jobs ({args.mix}), PS rack 1, workers rack 2 "
             f"(two-rack), {args.reps} repetitions, medians", "",
             "| metric | off | on | change |", "|---|---|---|---|",
             f"| average JCT (s) | {summary['avg_jct_off_s']} | {summary['avg_jct_on_s']} | "
             f"{summary['avg_jct_change_pct']} % |",
             f"| lagging job ({LAGGING}) mean iteration (s) | {summary['lagging_iter_off_s']} | "
             f"{summary['lagging_iter_on_s']} | {summary['lagging_iter_change_pct']} % |", "",
             "| rep | avg JCT off | avg JCT on | job-c iteration off | job-c iteration on |",
             "|---|---|---|---|---|"]
    for k, c in enumerate(cmps):
        lines.append(f"| {k + 1} | {c['avg_jct_off_s']} | {c['avg_jct_on_s']} | "
                     f"{c['lagging_iter_off_s']} | {c['lagging_iter_on_s']} |")
    lines += ["", "| job | median JCT off (s) | median JCT on (s) |", "|---|---|---|"]
    for name in [s.name for s in specs]:
        lines.append(f"| {name} | {median(c['jobs'][name]['jct_off_s'] for c in cmps)} | "
                     f"{median(c['jobs'][name]['jct_on_s'] for c in cmps)} |")
    lines += ["", f"wall time {wall:.0f} s; every job finished: {summary['all_finished']}; "
              f"runs in {out}", ""]
    text = "\n".join(lines)
    (out / "experiment.md").write_text(text)
    _plot(specs, cmps, runs, out)
    print(text)
    return 0 if summary["all_finished"] else 1


def _plot(specs, cmps, runs, out: Path) -> None:
    names = [s.name for s in specs]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = range(len(names))
    for k, (mode, color) in enumerate((("off", "#999999"), ("on", "#3b75af"))):
        ax.bar([i + 0.4 * k - 0.2 for i in x],
               [median(c["jobs"][n][f"jct_{mode}_s"] for c in cmps) or 0 for n in names],
               width=0.4, color=color, label=f"priority {mode}")
    ax.set_xticks(list(x), names)
    ax.set_ylabel("median JCT (s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "jct.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for mode, color in (("off", "#999999"), ("on", "#3b75af")):
        job = next(j for j in runs[mode][0]["jobs"] if j["name"] == LAGGING)
        its = [it for it in job.get("iterations") or [] if it[1] == 0]
        ax.plot([it[2] for it in its], [it[3] for it in its], marker=".", color=color,
                label=f"priority {mode}")
    ax.set_xlabel(f"{LAGGING} batch")
    ax.set_ylabel("iteration time (s)")
    ax.set_title(f"lagging job {LAGGING}, repetition 1, worker 0")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "lagging_iterations.png", dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
