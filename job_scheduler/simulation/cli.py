"""``sluice validate`` and ``sluice simulate`` (dispatched from sluice/cli.py).

Every argument and input file is checked before the first simulation runs: bad input
raises :class:`~sluice_common.errors.InputError` (exit 2) and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from job_scheduler.core.policies import (DEFAULT_EPS, DEFAULT_K, DEFAULT_V, POLICY_NAMES, REGISTRY,
                                         make_policy, parse_policy_names, policy_table,
                                         requested_gpus)
from job_scheduler.core.mechanisms import PACK_SLOWDOWN, MechanismOptions
from job_scheduler.core.proteus import K_READINGS
from job_scheduler.simulation.workloads import SCENARIO_CAPS, TRACE_CAPS
from sluice_common.errors import InputError

# show a progress bar on stderr from this many jobs on (short runs stay quiet)
PROGRESS_FROM_JOBS = 2000


# ---- sluice validate ------------------------------------------------------------------------

def configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="+", help="job description YAML file(s): every one "
                        "is checked, every problem reported")
    parser.add_argument("--topology", help="also check every job fits this topology "
                        "(built-in name or YAML path)")
    parser.add_argument("--cap-gpus", action="store_true",
                        help="print the jobs with max_gpus capped at the point of diminishing "
                             "returns (Liquid's resource estimator) instead of only warning")


def run_validate(args: argparse.Namespace) -> int:
    from sluice_common.errors import raise_all
    errors: list[InputError] = []
    for path in args.file:               # every file, then every problem of all of them
        try:
            _validate_one(args, path)
        except InputError as err:
            errors += err.errors
    raise_all(errors)
    return 0


def _validate_one(args: argparse.Namespace, path: str) -> None:
    from job_scheduler.core.estimator import Estimator
    from sluice_common.jobspec import load_jobs
    jobs = load_jobs(path)
    if args.topology:
        from topologies import load_topology
        topo = load_topology(args.topology)
        for job in jobs:
            if job.max_gpus > topo.total_gpus:
                raise InputError(path, f"asks for {job.max_gpus} GPUs, topology "
                                 f"'{topo.name}' has {topo.total_gpus}",
                                 element=f"job '{job.name}'", field="max_gpus")
    est = Estimator()
    print(f"{path}: {len(jobs)} job(s) OK")
    print(f"  {'name':<20} {'model':<14} {'params':>12} {'m':>9} {'e':>3} {'b':>4} "
          f"{'max_gpus':>8} {'arrival':>9} {'Cost(1) s':>11}")
    for job in jobs:
        print(f"  {job.name:<20} {job.model:<14} {est.params(job):>12,} {job.dataset_size:>9} "
              f"{job.epochs:>3} {job.batch_size:>4} {job.max_gpus:>8} {job.arrival:>9.1f} "
              f"{est.cost1(job):>11.1f}")
    from job_scheduler.core.gpu_advice import advise, capped_text
    advice = advise(jobs)
    for a in advice:
        if a.beyond:
            print(a.warning(), file=sys.stderr)
    if args.cap_gpus:
        print("# the job file with max_gpus capped at the point of diminishing returns:")
        print(capped_text(Path(path).read_text(encoding="utf-8"), advice), end="")


# ---- sluice simulate ------------------------------------------------------------------------

def configure_simulate(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "policies (job_scheduler.core.policies):\n" + policy_table()
    parser.add_argument("--workload", required=True,
                        help="proteus-{small,big}-{dispersed,concentrated}, a job YAML file, "
                             "or a trace CSV with --trace-format")
    parser.add_argument("--trace-format", choices=("tiresias", "philly"))
    parser.add_argument("--jobs", type=int, help="keep the first N jobs (arrival order)")
    parser.add_argument("--topology", default="two-rack", help="built-in name or YAML path")
    parser.add_argument("--policies", default="lyapunov,single,random,fifo,tetris,las",
                        help=f"comma-separated: {','.join(POLICY_NAMES)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenario-caps", choices=SCENARIO_CAPS, default="paper",
                        help="max_gpus of generated proteus-* jobs: 'paper' = 8 for every job "
                             "(the scheduler picks n in (0, N]), 'mixed' = 1, 2, 4 or 8 per job")
    parser.add_argument("--trace-caps", choices=TRACE_CAPS, default="requested",
                        help="max_gpus of trace jobs: 'requested' = the trace's count (a "
                             "policy may give fewer), 'paper' = up to 8 like the scenarios")
    parser.add_argument("--estimate-error", type=float, default=0.0,
                        help="sluice: sigma of the log-normal error on the job sizes it "
                             "sees (jobs still run their true time)")
    parser.add_argument("--slot", type=float, default=10.0, help="scheduling slot, seconds")
    parser.add_argument("--V", type=float, default=DEFAULT_V, help="Lyapunov penalty weight")
    parser.add_argument("--eps", type=float, default=DEFAULT_EPS,
                        help="growth of the virtual queue Z per slot (seconds)")
    parser.add_argument("--k", choices=K_READINGS, default=DEFAULT_K,
                        help="reading of k in k*Cost_i(1): 'job' = 1 per started job (n = "
                             "argmin C(n)), 'gpus' = the GPU count n (see proteus.py)")
    parser.add_argument("--lambda", dest="lam", type=float, default=0.5,
                        help="Liquid placement: weight of rack cost vs fitness")
    parser.add_argument("--no-ga", action="store_true", help="no group GA for batches")
    parser.add_argument("--placement", choices=("best-fit", "first-fit", "tetris"),
                        help="use this placement in every policy (default: each policy's own)")
    parser.add_argument("--no-network", action="store_true",
                        help="ideal fabric: no communication time (the Tiresias simulator's "
                             "assumption; checks the engine against its published figures)")
    parser.add_argument("--profile", default=None, metavar="FILE|NAME",
                        help="device profile for Cost_bat (a `sluice profile` YAML, or h100 "
                             "(default, measured) or p100 (derived))")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--plot", metavar="DIR", help="write PNG plots into DIR")
    parser.add_argument("--preemption-cost", choices=("measured", "zero"), default=None,
                        help="charge every preemption (and migration) its measured suspend + "
                             "resume time (job_scheduler/core/data/preemption_costs.yaml), or zero; "
                             "adds preemptions, migrations and avg_jct per policy to --json")
    parser.add_argument("--migrate", action="store_true",
                        help="move a running cross-rack job to one rack when that beats staying "
                             "(with --preemption-cost)")
    add_sharing_arguments(parser, "--preemption-cost, default measured; --json adds "
                                  "time_slices, packed, grows, shrinks; not with las")


def add_sharing_arguments(parser, where: str) -> None:
    """--time-slice, --pack and --pack-slowdown of ``sluice simulate`` and ``sluice run``."""
    parser.add_argument("--time-slice", type=float, default=None, metavar="QUANTUM_S",
                        help="Gandiva time-slicing: while jobs wait, running jobs that ran a "
                             "whole quantum are suspended and wait again, each switch at its "
                             "suspend + resume cost; the policy picks a resumed job's GPU "
                             f"count again ({where})")
    parser.add_argument("--pack", action="store_true",
                        help="packing: a waiting job that may run on one GPU shares the GPU "
                             "of a running one-GPU job when both fit in half its memory")
    parser.add_argument("--pack-slowdown", type=float, default=None, metavar="FACTOR",
                        help=f"--pack: per-job slowdown of two packed jobs (default "
                             f"{PACK_SLOWDOWN:g}, assumed: job_scheduler/core/mechanisms.py)")


# the fields of MechanismOptions (and the run's configs) -> the flags that set them
# (the rest: "--" and the field, "_" as "-")
FLAGS = {"costs": "--preemption-cost"}


def flag_error(err: ValueError, flags: dict = FLAGS) -> InputError:
    """A config's field-named ValueError ("field: message") as the flag's InputError."""
    field, _, message = str(err).partition(": ")
    return InputError(f"argument {flags.get(field, '--' + field.replace('_', '-'))}",
                      message or str(err))


def mechanism_options(args, costs: str | None, policies: list[str], where: str):
    """The namespace's --time-slice/--pack/--pack-slowdown/--migrate as MechanismOptions,
    checked once here against each of ``policies`` (``where``: their flag)."""
    if args.pack_slowdown is not None and not args.pack:
        raise InputError("argument --pack-slowdown", "needs --pack")
    try:
        opts = MechanismOptions(migrate=args.migrate, time_slice=args.time_slice,
                                pack=args.pack, costs=costs,
                                pack_slowdown=(PACK_SLOWDOWN if args.pack_slowdown is None
                                               else args.pack_slowdown))
        for name in policies:
            opts.check(name)
    except ValueError as err:
        raise flag_error(err, {**FLAGS, "policy": where})
    return opts


def _check_args(args: argparse.Namespace) -> list[str]:
    names = parse_policy_names(args.policies)
    if not args.slot > 0:
        raise InputError("argument", f"must be > 0 seconds, got {args.slot}", field="slot")
    for key in ("V", "eps"):
        if not getattr(args, key) >= 0:
            raise InputError("argument", f"must be >= 0, got {getattr(args, key)}", field=key)
    if not args.estimate_error >= 0:
        raise InputError("argument", f"must be >= 0, got {args.estimate_error}",
                         field="estimate-error")
    if not 0.0 <= args.lam <= 1.0:
        raise InputError("argument", f"must be in [0, 1], got {args.lam}", field="lambda")
    if args.plot:
        plot_dir = Path(args.plot)
        if plot_dir.exists() and not plot_dir.is_dir():
            raise InputError(args.plot, "exists and is not a directory", field="plot")
        existing = plot_dir
        while not existing.exists():            # created only after the runs succeed
            existing = existing.parent
        if not existing.is_dir() or not os.access(existing, os.W_OK):
            raise InputError(args.plot, f"cannot create plots under '{existing}'", field="plot")
    return names


def run_simulate(args: argparse.Namespace) -> int:
    from job_scheduler.simulation.simulator import Simulator, stderr_progress
    from job_scheduler.simulation.workloads import load_workload
    from topologies import load_topology

    names = _check_args(args)
    topo = load_topology(args.topology)
    jobs = load_workload(args.workload, trace_format=args.trace_format, jobs=args.jobs,
                         seed=args.seed, caps=args.scenario_caps, trace_caps=args.trace_caps)
    if not jobs:
        raise InputError(args.workload, "no jobs")
    fixed = [n for n in names if REGISTRY[n].fixed_count]
    for job in jobs:
        if fixed and requested_gpus(job) > topo.total_gpus:
            raise InputError(args.workload, f"asks for {requested_gpus(job)} GPUs; policy "
                             f"'{fixed[0]}' runs jobs at that count and topology "
                             f"'{topo.name}' has {topo.total_gpus}",
                             element=f"job '{job.name}'", field="max_gpus")

    from job_scheduler.core.estimator import Estimator

    estimator = Estimator(args.profile)
    from job_scheduler.core.mechanisms import summary
    from job_scheduler.core.preemption import load_costs

    results = {}
    extra: dict[str, dict] = {}
    if args.migrate and not args.preemption_cost:
        raise InputError("argument --migrate", "needs --preemption-cost measured|zero")
    mech = mechanism_options(args, args.preemption_cost, names, "--policies")
    # time-slicing and packing charge every switch: the measured table by default
    cost_mode = args.preemption_cost or ("measured" if mech.shares else None)
    costs = load_costs(cost_mode)
    for name in names:
        policy = make_policy(name, seed=args.seed, V=args.V, eps=args.eps, lam=args.lam,
                             ga=not args.no_ga, placement=args.placement, k=args.k,
                             estimate_error=args.estimate_error)
        progress = stderr_progress(name) if len(jobs) >= PROGRESS_FROM_JOBS else None
        sim = Simulator(topo, jobs, policy, slot=args.slot, progress=progress,
                        network=not args.no_network, estimator=estimator, costs=costs,
                        mechanisms=mech.build())
        results[name] = sim.run()
        if cost_mode:
            extra[name] = summary(sim, results[name])

    if args.plot:
        from job_scheduler.simulation.sim_plots import write_plots
        for path in write_plots(results, args.plot, title=f"{args.workload} on {topo.name}"):
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps({"policies": {n: {**r.metrics(), **extra.get(n, {})}
                                       for n, r in results.items()},
                          "workload": str(args.workload), "topology": topo.name,
                          "seed": args.seed}))
    else:
        _print_table(results, args, topo.name, len(jobs))
        for n, e in extra.items():
            print(f"{n}: {e['preemptions']} preemptions, {e['migrations']} migrations, "
                  f"{e['grows']} grows, {e['shrinks']} shrinks, {e['time_slices']} time slices, "
                  f"{e['packed']} packed, {e['preemption_cost_s']:.1f} s of suspend/resume "
                  f"charged ({cost_mode} cost)")
    return 0


def _print_table(results, args, topo_name: str, n_jobs: int) -> None:
    print(f"workload {args.workload} ({n_jobs} jobs) on {topo_name}, slot {args.slot:g} s, "
          f"seed {args.seed}")
    head = (f"{'policy':<10} {'avg JCT s':>11} {'median s':>10} {'p95 s':>10} {'avg wait s':>11} "
            f"{'makespan s':>11} {'GPU util':>9} {'jobs':>6}")
    print(head)
    print("-" * len(head))
    for name, r in results.items():
        print(f"{name:<10} {r.avg_jct:>11.1f} {r.median_jct:>10.1f} {r.p95_jct:>10.1f} "
              f"{r.avg_wait:>11.1f} {r.makespan:>11.1f} {r.gpu_util:>9.1%} {r.jobs:>6}")
