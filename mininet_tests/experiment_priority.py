"""Priority off vs on on a shared, oversubscribed rack uplink (two-rack, real PS jobs).

    .venv/bin/python -m mininet_tests.experiment_priority [--reps 3] [--mix one-late|two-late]
        [--rank progress] [--out DIR]
    .venv/bin/python -m mininet_tests.experiment_priority --mix heavy-tail|same-start
        [--load 0.7] [--seeds 5] [--baselines none|all] [--cc machine|bbr|cubic] [--out DIR]
        # the heavy-tail experiment's own command line: mininet_tests/heavy_tail/

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

from sluice_common import rank_rules  # noqa: E402
from job_scheduler.core.estimator import Estimator, nominal_bandwidth  # noqa: E402
from sluice_common.jobspec import JobSpec  # noqa: E402
from job_scheduler.core.decisions import StartDecision  # noqa: E402
from sluice_common.placement import Placement  # noqa: E402
from end_to_end.report import comparison, write_report  # noqa: E402
from end_to_end.result import iterations_of  # noqa: E402
from end_to_end.run import environment  # noqa: E402
from end_to_end.runloop import RealTimeRun  # noqa: E402
from end_to_end.run_options import RunOptions
from topologies import load_topology  # noqa: E402

LAGGING = "job-c"
# the mixes the heavy-tail experiment's own command line takes (mininet_tests/heavy_tail/)
HEAVY_TAIL_MIXES = ("heavy-tail", "same-start")


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
    which = argparse.ArgumentParser(add_help=False)
    which.add_argument("--mix", default="one-late")
    if which.parse_known_args(argv)[0].mix in HEAVY_TAIL_MIXES:
        from mininet_tests.heavy_tail.cli import main as heavy_tail_main
        return heavy_tail_main(argv)
    ap = argparse.ArgumentParser(prog="python -m mininet_tests.experiment_priority",
                                 description=__doc__.split("\n")[0],
                                 epilog="--mix heavy-tail|same-start: the heavy-tail "
                                        "experiment's options (--mix heavy-tail --help)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batches", type=int, default=40, help="batches of job-a and job-b")
    ap.add_argument("--short-batches", type=int, default=15, help="batches of job-c")
    ap.add_argument("--mix", default="one-late", choices=("one-late", "two-late") + HEAVY_TAIL_MIXES,
                    help="arrival pattern (see jobs()); heavy-tail and same-start: "
                         "mininet_tests/heavy_tail/")
    ap.add_argument("--rank", default="progress", choices=rank_rules.names(),
                    help="the rule of the priority-on runs (default progress): "
                         f"{rank_rules.help_text()}")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
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
    summary = summarize(cmps, runs, len(specs), args.reps, wall)
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


def _change(a, b):
    return None if not a or b is None else round(100 * (b - a) / a, 1)


def summarize(cmps: list[dict], runs: dict[str, list[dict]], jobs: int, reps: int,
              wall: float) -> dict:
    """The medians over the repetitions' off/on comparisons, and their changes."""
    summary = {
        "reps": reps, "wall_time_s": round(wall, 1),
        "avg_jct_off_s": median(c["avg_jct_off_s"] for c in cmps),
        "avg_jct_on_s": median(c["avg_jct_on_s"] for c in cmps),
        "lagging_iter_off_s": median(c["lagging_iter_off_s"] for c in cmps),
        "lagging_iter_on_s": median(c["lagging_iter_on_s"] for c in cmps),
        "per_rep": cmps,
        "all_finished": all(r["summary"]["finished"] == jobs for rs in runs.values() for r in rs),
    }
    summary["avg_jct_change_pct"] = _change(summary["avg_jct_off_s"], summary["avg_jct_on_s"])
    summary["lagging_iter_change_pct"] = _change(summary["lagging_iter_off_s"],
                                                 summary["lagging_iter_on_s"])
    return summary


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
        its = [it for it in iterations_of(job) if it.worker == 0]
        ax.plot([it.batch for it in its], [it.time_s for it in its], marker=".", color=color,
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
