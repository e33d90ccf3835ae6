"""``sluice whatif``: what sluice buys on your cluster. The demo's four arms
(``end_to_end.arms``: a Slurm today, b + sluice's priority, c sluice's scheduler, d
sluice's scheduler priced with the fabric's rule + priority) run in the discrete-event
simulator on your trace and topology, at the trace's own load or scaled to another
(``end_to_end.whatif``), side by side (``end_to_end.whatif_run``).

Every argument and the trace are checked before the first simulation: bad input raises
:class:`~sluice_common.errors.InputError` (exit 2) and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from end_to_end.arms import ALL_ARMS, ARMS, parse_arms
from end_to_end.whatif import (RECORDED, arrival_window, known_error, known_error_lines,
                              offered_load,
                               parse_load, report, scale_to_load)
from end_to_end.whatif_run import SimOptions
from job_scheduler.simulation.compare import EXCHANGE_WORLDS
from job_scheduler.simulation.workloads import TRACE_FORMATS, WORKLOADS_ENV
from sluice_common import rank_rules
from sluice_common.errors import InputError, flag_error
from sluice_common.rank_rules import DEFAULT_RULE

PLOT_NAME = "whatif.png"


def configure_whatif(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "arms (end_to_end/arms.py):\n" + "\n".join(
        f"  {a.key}  {a.title}" for a in ARMS.values())
    parser.add_argument("--trace", required=True, metavar="FILE",
                        help="the trace CSV; a file name not found here is looked up in "
                             f"the folder ${WORKLOADS_ENV} names")
    parser.add_argument("--trace-format", choices=TRACE_FORMATS,
                        help="the trace's format (default: recognised by the CSV header)")
    parser.add_argument("--topology", default="cluster-2k",
                        help="built-in name or YAML path")
    parser.add_argument("--load", required=True, metavar="L|recorded",
                        help="offered load to scale the arrivals to, in (0, 1]: the jobs' "
                             "recorded GPU-seconds over (the topology's GPUs x the arrival "
                             "window), the window stretched or shrunk, its shape kept; "
                             f"'{RECORDED}': the arrivals as recorded")
    parser.add_argument("--trace-assumptions", metavar="FILE",
                        help="what a sacct record lacks (model, batch size, PS count), per "
                             "partition or job-name pattern (YAML; default: the Philly rule "
                             "on each job's GPU-time)")
    parser.add_argument("--jobs", type=int, help="keep the first N jobs (arrival order)")
    parser.add_argument("--arms", default=ALL_ARMS, help="comma-separated arms to run")
    parser.add_argument("--exchange", choices=EXCHANGE_WORLDS, default="cluster",
                        help="price every batch with the exchange model on the cluster as "
                             "described (hardware switches), on its emulated fabric, or off "
                             "(eq. 5 alone)")
    parser.add_argument("--profile", default=None, metavar="FILE|NAME",
                        help="device profile for Cost_bat (a `sluice profile` YAML, or h100 "
                             "or p100; default: $SLUICE_PROFILE, else h100)")
    parser.add_argument("--rank", default=DEFAULT_RULE, choices=rank_rules.names(),
                        help="the controller's rule in the arms with priority (and arm d's "
                             f"price), default {DEFAULT_RULE}")
    parser.add_argument("--slot", type=float, default=10.0, help="scheduling slot, seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the seeded policies")
    parser.add_argument("--workers", type=int, default=None,
                        help="arms simulated at once, one process each (default: one per "
                             "arm, at most the CPUs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--plot", metavar="DIR",
                        help=f"write {PLOT_NAME} (each arm's average and p95 JCT) into DIR")


def _check_plot_dir(plot: str) -> None:
    path = Path(plot)
    if path.exists() and not path.is_dir():
        raise InputError(plot, "exists and is not a directory", field="plot")
    existing = path
    while not existing.exists():              # created only after the runs succeed
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise InputError(plot, f"cannot create a plot under '{existing}'", field="plot")


@dataclass(frozen=True)
class WhatifOptions:
    """``sluice whatif``'s options, built once from its namespace (:func:`whatif_options`);
    the defaults are the parser's. Checked by :func:`_whatif`."""
    trace: str                        # the trace CSV
    load: str                         # "L" in (0, 1], or RECORDED
    trace_format: str | None = None   # None: told by the CSV header
    topology: str = "cluster-2k"
    trace_assumptions: str | None = None
    jobs: int | None = None           # keep the first N jobs
    arms: str = ALL_ARMS
    exchange: str = "cluster"
    profile: str | None = None
    rank: str = DEFAULT_RULE
    slot: float = 10.0
    seed: int = 0
    workers: int | None = None        # None: one process per arm, at most the CPUs
    json: bool = False
    plot: str | None = None


def whatif_options(args: argparse.Namespace) -> WhatifOptions:
    """The namespace of :func:`configure_whatif` as :class:`WhatifOptions`."""
    return WhatifOptions(**{f.name: getattr(args, f.name) for f in fields(WhatifOptions)})


def run_whatif(args: argparse.Namespace) -> int:
    try:
        return _whatif(whatif_options(args))
    except InputError as err:        # an option's field (load, arms, ...) -> its flag
        raise flag_error(err, {})


def _trace_fields(fields: dict) -> dict:
    """The sacct export's account of itself as ``trace_export`` (``trace`` is the
    file), and the assumptions (assumption -> job count)."""
    out = {}
    if "trace" in fields:
        out["trace_export"] = fields["trace"]
    if "assumptions" in fields:
        out["assumptions"] = fields["assumptions"]
    return out


def _whatif(opts: WhatifOptions) -> int:
    from job_scheduler.core.policies import requested_gpus
    from job_scheduler.simulation.compare import profile_text
    from job_scheduler.simulation.compare import trace_json
    from job_scheduler.simulation.workloads import load_workload_report
    from end_to_end.whatif_run import estimator_for, run_arms
    from topologies import load_topology

    arms = parse_arms(opts.arms)
    load = parse_load(opts.load)
    if not opts.slot > 0:
        raise InputError("argument --slot", f"must be > 0 seconds, got {opts.slot:g}")
    if opts.workers is not None and opts.workers < 1:
        raise InputError("argument --workers", f"must be >= 1, got {opts.workers}")
    if opts.plot:
        _check_plot_dir(opts.plot)
    topo = load_topology(opts.topology)
    jobs, trace = load_workload_report(opts.trace, trace_format=opts.trace_format,
                                       jobs=opts.jobs, trace_assumptions=opts.trace_assumptions)
    if trace is not None and not opts.json:
        print("\n".join(trace.report_lines()), file=sys.stderr)
    for job in jobs:
        if requested_gpus(job) > topo.total_gpus:
            raise InputError(opts.trace, f"asks for {requested_gpus(job)} GPUs; arms a and b "
                             f"run jobs at that count and topology '{topo.name}' has "
                             f"{topo.total_gpus}", element=f"job '{job.name}'", field="num_gpus")
    recorded = offered_load(jobs, topo.total_gpus, opts.trace)
    jobs, scale = scale_to_load(jobs, topo.total_gpus, load, opts.trace)
    used = offered_load(jobs, topo.total_gpus, opts.trace)
    options = SimOptions(exchange=opts.exchange, profile=opts.profile, slot=opts.slot,
                         rank=opts.rank, seed=opts.seed)
    profile = profile_text(estimator_for(topo, options))     # a bad profile: before the runs
    if not opts.json:
        print(f"{len(jobs)} jobs of {opts.trace} on {topo.name} ({topo.total_gpus} GPUs), "
              f"offered load {_load_text(used)}"
              + ("" if load is None else f" (recorded {_load_text(recorded)}, arrivals x "
                 f"{scale:.4g})") + f"; device profile {profile}", file=sys.stderr)
    with _Bars([a.key for a in arms]) as bars:
        results = run_arms(topo, jobs, arms, options, opts.workers, bars.update)
    out = report(arms=results, load=used, load_requested=load, load_recorded=recorded,
                 jobs=len(jobs), topology=topo.name, total_gpus=topo.total_gpus,
                 window_s=arrival_window(jobs), scale=scale,
                 trace=str(opts.trace), **_trace_fields(trace_json(jobs, trace)),
                 simulator_error=known_error(), exchange=opts.exchange, rank=opts.rank,
                 slot_s=opts.slot, device_profile=profile)
    if opts.plot:
        path = write_plot(out, opts.plot)
        print(f"wrote {path}", file=sys.stderr)
    if opts.json:
        print(json.dumps(out))
    else:
        print_table(out)
    return 0


def _load_text(load: float | None) -> str:
    return "undefined (every job arrives at once)" if load is None else f"{load:.3f}"


class _Bars:
    """One progress bar per arm on stderr (jobs done), quiet off a terminal."""

    def __init__(self, keys: list[str]):
        from sluice_common.progress import interactive

        self.progress, self.tasks = None, {}
        if interactive():
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)
            self.progress = Progress(TextColumn("arm {task.fields[arm]}"), BarColumn(),
                                     MofNCompleteColumn(), TextColumn("jobs"),
                                     TimeElapsedColumn(), console=Console(file=sys.stderr))
            self.tasks = {k: self.progress.add_task(k, total=None, arm=k) for k in keys}

    def __enter__(self) -> "_Bars":
        if self.progress:
            self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.progress:
            self.progress.stop()

    def update(self, key: str, done: int, total: int) -> None:
        if self.progress:
            self.progress.update(self.tasks[key], completed=done, total=total)


# what the table's columns mean, printed under it
LEGEND = (
    "avg / p95 JCT: job completion time (end - arrival); makespan: first arrival to last "
    "end; GPU util: GPU-seconds run / (GPUs x makespan);\n"
    "cross-rack: share of the multi-host jobs placed across racks; uplink p50 / p99: "
    "quantiles over time and rack uplinks of an uplink's carried rate / its capacity;\n"
    "exchange: share of the jobs' running time spent in parameter exchange "
    "(end_to_end/whatif.py)")


def print_table(out: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"sluice whatif: {out['jobs']} jobs on {out['topology']}, offered "
                        f"load {_load_text(out['load'])}, exchange model {out['exchange']}")
    for name in ("arm", "scheduler", "avg JCT s", "p95 JCT s", "makespan s", "GPU util",
                 "cross-rack", "uplink p50", "uplink p99", "exchange"):
        table.add_column(name, justify="left" if name in ("arm", "scheduler") else "right")
    for key, a in out["arms"].items():
        table.add_row(key, a["title"], f"{a['avg_jct_s']:,.0f}", f"{a['p95_jct_s']:,.0f}",
                      f"{a['makespan_s']:,.0f}", f"{a['gpu_util']:.1%}",
                      f"{a['cross_rack_share']:.1%}", f"{a['uplink_util_p50']:.1%}",
                      f"{a['uplink_util_p99']:.1%}", f"{a['exchange_share']:.1%}")
    console.print(table)
    for name, text in (("b_vs_a", "b against a (sluice's priority on Slurm's jobs)"),
                       ("d_vs_c", "d against c (the fabric's rule in the price, and priority)")):
        if out.get(name) is not None:
            console.print(f"{text}: average JCT {out[name]:+.1%}", highlight=False)
    for said, count in out.get("assumptions", {}).items():
        console.print(f"assumed for {count} job(s): {said}", highlight=False)
    for line in known_error_lines(out.get("simulator_error", {})):
        console.print(line, highlight=False)
    console.print(LEGEND, highlight=False)


def write_plot(out: dict, folder: str) -> Path:
    """One PNG: each arm's average and p95 JCT, side by side."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(out["arms"])
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.38
    xs = range(len(keys))
    for shift, field, label in ((-width / 2, "avg_jct_s", "average JCT"),
                                (width / 2, "p95_jct_s", "p95 JCT")):
        ax.bar([x + shift for x in xs], [out["arms"][k][field] for k in keys], width,
               label=label)
    ax.set_xticks(list(xs), [f"{k}\n{ARMS[k].policy}" + (" +prio" if ARMS[k].priority else "")
                             for k in keys])
    ax.set_ylabel("seconds")
    ax.set_title(f"{out['jobs']} jobs on {out['topology']}, offered load "
                 f"{_load_text(out['load'])}")
    ax.legend()
    fig.tight_layout()
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    target = path / PLOT_NAME
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target
