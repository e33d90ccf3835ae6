"""``sluice run`` and ``sluice demo`` on the command line: the arguments, turned once into
a :class:`~end_to_end.run.RunConfig` (its field errors named by their flags here and
only here), then ``end_to_end.run`` (or ``end_to_end.slurm_demo`` for ``sluice demo
--executor slurm``)."""

from __future__ import annotations

import argparse
import dataclasses

from sluice_common import rank_rules
from sluice_common.rank_rules import DEFAULT_RULE
from end_to_end import run
from end_to_end.run import RunConfig
from job_scheduler.simulation.cli import FLAGS, add_sharing_arguments, mechanism_options
from job_scheduler.core.policies import DEFAULT_LAS_THRESHOLDS, POLICY_NAMES
from job_scheduler.core.policy_cli import add_price_priority_argument
from sluice_common.errors import InputError, flag_error


def _common(parser) -> None:
    parser.add_argument("--out", default=None, help="report directory (default runs/<command>-<time>)")
    parser.add_argument("--slot", type=float, default=1.0, help="scheduling slot, seconds (default 1)")
    parser.add_argument("--batches", type=int, default=None,
                        help="batches per worker (default: epochs*dataset_size/(batch_size*GPUs))")
    parser.add_argument("--input-size", type=int, default=64,
                        help="image size for resnet18/alexnet/vgg16/googlenet (default 64; smallcnn is 28x28)")
    parser.add_argument("--job-timeout", type=float, default=900.0,
                        help="seconds before a job is stopped (default %(default)g)")
    from ps_runtime.cli import add_compute_arguments

    add_compute_arguments(parser)
    parser.add_argument("--rank", default=DEFAULT_RULE, choices=rank_rules.names(),
                        help=f"controller ranking rule when priority is on (default "
                             f"{DEFAULT_RULE}): {rank_rules.help_text()}")


def configure_run(parser) -> None:
    parser.add_argument("jobs", help="job description YAML (see sluice_common/jobspec.py)")
    parser.add_argument("--topology", default="two-rack", help="built-in name or YAML path")
    parser.add_argument("--priority", default="on", help="on|off: flow priority by the --rank rule")
    parser.add_argument("--policy", default="lyapunov", help=f"one of {', '.join(POLICY_NAMES)}")
    add_price_priority_argument(parser, "; with --policy sluice only, and most meaningful "
                                "with --priority on and --rank the same rule")
    _common(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the policy (random, sluice)")
    parser.add_argument("--migrate", action="store_true",
                        help="move a running cross-rack job to one rack (suspend here, resume "
                             "there) when its predicted remaining time plus the measured "
                             "migration cost beats staying")
    parser.add_argument("--las-threshold", type=float, default=DEFAULT_LAS_THRESHOLDS[0],
                        metavar="GPU_S", help="--policy las: attained GPU-seconds that demote a "
                        f"job to the second queue (default {DEFAULT_LAS_THRESHOLDS[0]:g}, "
                        "Tiresias'; a run of minutes wants tens)")
    add_sharing_arguments(parser, "job_scheduler/core/mechanisms.py; not with las")
    parser.add_argument("--dry-run", action="store_true",
                        help="make the run's decisions with the job durations the estimator "
                             "predicts and print each slot's plan (starts, suspends, "
                             "placements): no fabric, no process")


def demo_description() -> str:
    """What ``sluice demo`` does, from the arms and the draw it runs."""
    from end_to_end.arms import ARMS
    from end_to_end.workload_draw import DEMO_SEED, DrawSpec

    return (f"The end-to-end demo on {run.DEMO_TOPOLOGY}: {DrawSpec().jobs} jobs drawn from "
            f"the Philly trace's distributions (seed {DEMO_SEED}), run on the fabric once "
            f"per arm, {len(ARMS)} arms: " + "; ".join(f"{a.key}: {a.title}"
                                                      for a in ARMS.values())
            + ". With --executor slurm: the jobs of end_to_end/data/demo_jobs.yaml through "
            "`sluice scheduler --executor slurm` and a local Slurm cluster instead.")


def configure_demo(parser) -> None:
    parser.description = demo_description()
    _common(parser)
    from end_to_end.arms import ALL_ARMS, ARMS
    from end_to_end.workload_draw import DEMO_SEED, DrawSpec
    parser.add_argument("--arms", default=None,
                        help="the arms to run, comma-separated (default all, " + ALL_ARMS + ": " + "; ".join(
                            f"{a.key}: {a.title}" for a in ARMS.values()) + ")")
    parser.add_argument("--jobs", dest="workload_jobs", type=int, default=None, metavar="N",
                        help=f"how many jobs to draw (default {DrawSpec().jobs}; fewer for a "
                             "quick look, the arrivals scaled to the same offered load)")
    parser.add_argument("--seed", dest="workload_seed", type=int, default=None, metavar="SEED",
                        help=f"seed of the workload drawn from the Philly trace's "
                             f"distributions (default {DEMO_SEED})")
    from job_scheduler.service.executor_registry import SLURM
    parser.add_argument("--executor", default="direct", choices=("direct", SLURM),
                        help=f"direct (default): the {len(ARMS)} arms, jobs started on the "
                        "fabric's hosts by the run loop; slurm: the jobs of end_to_end/data/"
                        "demo_jobs.yaml through `sluice scheduler --executor slurm` and a "
                        "local Slurm cluster on the fabric, report DIR/slurm.json")


def run_config(args: argparse.Namespace, **fixed) -> RunConfig:
    """The namespace as a RunConfig (``fixed``: fields a command sets itself)."""
    from ps_runtime.compute import describe, resolve_compute

    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(RunConfig)
             if f.name in vars(args)}          # sluice demo has no --seed, --migrate, ...
    if "migrate" in vars(args):
        mech = mechanism_options(migrate=args.migrate, time_slice=args.time_slice,
                                 pack=args.pack, pack_slowdown=args.pack_slowdown, costs=None)
        # a mechanism charges (and migration weighs) the measured suspend + resume table
        given["mechanisms"] = dataclasses.replace(mech, costs="measured") if mech.build() else mech
    try:
        compute = resolve_compute(args.compute)
        return RunConfig(**{**given, **fixed, "compute": compute,
                            "compute_info": describe(compute, args.profile)})
    except ValueError as err:       # a field's error (an option's InputError too)
        raise flag_error(err, FLAGS)


def run_run(args: argparse.Namespace) -> int:
    config = run_config(args)
    try:
        return run.run(config)
    except InputError as err:       # an option's field -> its flag
        raise flag_error(err, FLAGS)


def run_demo(args: argparse.Namespace) -> int:
    config = run_config(args, jobs=str(run.DEMO_JOBS), topology=run.DEMO_TOPOLOGY)
    from job_scheduler.service.executor_registry import SLURM
    if args.executor == SLURM:
        for flag, value in (("--arms", args.arms), ("--seed", args.workload_seed),
                            ("--jobs", args.workload_jobs)):
            if value is not None:
                raise InputError(f"argument {flag}", "not with --executor slurm (its jobs are "
                                 "end_to_end/data/demo_jobs.yaml)")
        from end_to_end.slurm_demo import run_slurm_demo

        try:
            return run_slurm_demo(config)
        except InputError as err:       # an option's field -> its flag
            raise flag_error(err, FLAGS)
    from end_to_end.arms import ALL_ARMS, parse_arms
    from end_to_end.demo_arms import demo
    from end_to_end.workload_draw import DEMO_SEED, DrawSpec

    if args.workload_jobs is not None and args.workload_jobs < 1:
        raise InputError("argument --jobs", f"must be >= 1, got {args.workload_jobs}")
    try:
        arms = parse_arms(ALL_ARMS if args.arms is None else args.arms)   # before anything starts
    except InputError as err:
        raise flag_error(err, FLAGS)
    spec = DrawSpec(jobs=args.workload_jobs or DrawSpec().jobs)
    return demo(config, arms, DEMO_SEED if args.workload_seed is None else args.workload_seed, spec)

