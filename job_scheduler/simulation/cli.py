"""``sluice validate`` and ``sluice simulate`` (dispatched from sluice/cli.py).

``sluice simulate``'s arguments are turned once into a
:class:`~job_scheduler.simulation.compare.SimulateConfig` (its field errors named by their flags
here and only here), then ``job_scheduler.simulation.compare.simulate``. Every argument and
input file is checked before the first simulation runs: bad input raises
:class:`~sluice_common.errors.InputError` (exit 2) and nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from job_scheduler.core.policies import (DEFAULT_EPS, DEFAULT_K, DEFAULT_V, POLICY_NAMES,
                                         parse_policy_names, policy_table)
from job_scheduler.core.policies.base import PLACEMENTS
from job_scheduler.core.policy_cli import add_price_priority_argument
from job_scheduler.core.mechanisms import PACK_SLOWDOWN, MechanismOptions
from job_scheduler.core.proteus import K_READINGS
from job_scheduler.simulation.compare import EXCHANGE_WORLDS, SimulateConfig
from job_scheduler.simulation.workloads import (BUILTIN_WORKLOADS, SCENARIO_CAPS, TRACE_CAPS,
                                                TRACE_FORMATS, WORKLOADS_ENV)
from sluice_common.errors import InputError, flag_error
from sluice_common import rank_rules


# ---- sluice validate ------------------------------------------------------------------------

def configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="+", help="job description YAML file(s): every one "
                        "is checked, every problem reported")
    parser.add_argument("--topology", help="also check every job fits this topology "
                        "(built-in name or YAML path)")
    parser.add_argument("--cap-gpus", action="store_true",
                        help="write the job file (one) to stdout with max_gpus capped at the "
                             "point of diminishing returns (Liquid's resource estimator), "
                             "the table and warnings to stderr: `sluice validate --cap-gpus "
                             "jobs.yaml > capped.yaml`; without it, only warn")


# what the columns of the validate table mean
VALIDATE_LEGEND = ("  params: the model's parameters; m: dataset_size (samples); e: epochs; "
                   "b: batch_size;\n  Cost(1) s: the job's predicted work on one GPU "
                   "(Cost_i(1), GPU-seconds, device profile {profile})")


def run_validate(args: argparse.Namespace) -> int:
    from sluice_common.errors import raise_all
    if args.cap_gpus and len(args.file) > 1:
        raise InputError("argument --cap-gpus", f"writes one capped job file, got "
                         f"{len(args.file)} files")
    errors: list[InputError] = []
    for path in args.file:               # every file, then every problem of all of them
        try:
            _validate_one(path, args.topology, args.cap_gpus)
        except InputError as err:
            errors += err.errors
    raise_all(errors)
    return 0


def _validate_one(path: str, topology: str | None, cap_gpus: bool) -> None:
    """One job file's report; ``topology``: check the jobs fit it (None: no check);
    ``cap_gpus``: print the file with max_gpus capped (stdout) and the table on stderr."""
    from job_scheduler.core.estimator import Estimator
    from sluice_common.jobspec import load_jobs
    jobs = load_jobs(path)
    if topology:
        from topologies import load_topology
        topo = load_topology(topology)
        for job in jobs:
            if job.max_gpus > topo.total_gpus:
                raise InputError(path, f"asks for {job.max_gpus} GPUs, topology "
                                 f"'{topo.name}' has {topo.total_gpus}",
                                 element=f"job '{job.name}'", field="max_gpus")
    est = Estimator()
    # with --cap-gpus stdout carries the capped job file alone
    table = sys.stderr if cap_gpus else sys.stdout
    print(f"{path}: {len(jobs)} job(s) OK", file=table)
    print(f"  {'name':<20} {'model':<14} {'params':>12} {'m':>9} {'e':>3} {'b':>4} "
          f"{'max_gpus':>8} {'arrival':>9} {'Cost(1) s':>11}", file=table)
    for job in jobs:
        print(f"  {job.name:<20} {job.model:<14} {est.params(job):>12,} {job.dataset_size:>9} "
              f"{job.epochs:>3} {job.batch_size:>4} {job.max_gpus:>8} {job.arrival:>9.1f} "
              f"{est.cost1(job):>11.1f}", file=table)
    print(VALIDATE_LEGEND.format(profile=est.device), file=table)
    from job_scheduler.core.gpu_advice import advise, capped_text
    advice = advise(jobs)
    for a in advice:
        if a.beyond:
            print(f"{path}: {a.warning()}" + (" - capped" if cap_gpus else ""),
                  file=sys.stderr)
    if cap_gpus:
        print(f"# {Path(path).name} with max_gpus capped at the point of diminishing returns "
              "(sluice validate --cap-gpus)")
        print(capped_text(Path(path).read_text(encoding="utf-8"), advice), end="")


# ---- sluice simulate ------------------------------------------------------------------------

def configure_simulate(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "policies (job_scheduler.core.policies):\n" + policy_table()
    parser.add_argument("--workload", required=True,
                        help=f"a built-in workload ({', '.join(BUILTIN_WORKLOADS)}), a job "
                             "YAML file, a trace CSV (Tiresias or Philly, told by its "
                             "header or by --trace-format), or a site's sacct export "
                             "(--trace-format sacct); a file name not found here is "
                             f"looked up in the folder ${WORKLOADS_ENV} names")
    parser.add_argument("--trace-format", choices=TRACE_FORMATS,
                        help="read --workload as a trace of this format; sacct: `sacct "
                             "--json` or `sacct --parsable2` output (default: recognised "
                             "by the header: a CSV trace, or a sacct --parsable2 export)")
    parser.add_argument("--trace-assumptions", metavar="FILE",
                        help="with --trace-format sacct: a YAML file giving model, "
                             "batch_size, num_ps per partition or job-name pattern, first "
                             "match wins (default: none, every job by the Philly rule: "
                             "model by GPU-time, batch size 32, one PS)")
    parser.add_argument("--jobs", type=int, help="keep the first N jobs (arrival order)")
    parser.add_argument("--topology", default="two-rack", help="built-in name or YAML path")
    parser.add_argument("--policies", default=",".join(SimulateConfig.policies),
                        help=f"comma-separated: {','.join(POLICY_NAMES)}")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the generated workloads and of the seeded policies")
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
    parser.add_argument("--placement", choices=PLACEMENTS,
                        help="use this placement in every policy (default: each policy's own; "
                             "slurm: the nodes Slurm's cons_tres + topology/tree would choose)")
    parser.add_argument("--no-network", action="store_true",
                        help="ideal fabric: no communication time (the Tiresias simulator's "
                             "assumption; checks the engine against its published figures)")
    parser.add_argument("--priority", choices=("off", *rank_rules.names()), default="off",
                        help="the fabric's job priority rule on the rack uplinks (strict "
                             "priority by the controller's rule; off: flows share fairly)")
    add_price_priority_argument(parser, "; needs sluice in --policies, and is most "
                                "meaningful with --priority set to the same rule")
    parser.add_argument("--exchange", choices=EXCHANGE_WORLDS, default="off",
                        help="price every batch with the exchange model: ps-lite's per-key "
                             "messages and round trips, and each round's wait in the queues "
                             "of the shared uplinks by priority class; on the cluster as "
                             "described (hardware switches) or on its emulated fabric (the "
                             "rates sluice run uses, the calibrated userspace datapath)")
    parser.add_argument("--profile", default=None, metavar="FILE|NAME",
                        help="device profile for Cost_bat (a `sluice profile` YAML, or h100 "
                             "(measured) or p100 (derived); default: $SLUICE_PROFILE, else "
                             "h100)")
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
# SimulateConfig's fields whose flag is not "--" and the field
SIMULATE_FLAGS = {**FLAGS, "lam": "--lambda", "policy": "--policies"}


def mechanism_options(*, migrate: bool, time_slice: float | None, pack: bool,
                      pack_slowdown: float | None, costs: str | None) -> MechanismOptions:
    """--migrate/--time-slice/--pack/--pack-slowdown as MechanismOptions (a
    ``pack_slowdown`` of None: the default); a bad value raises the flag's InputError."""
    if pack_slowdown is not None and not pack:
        raise InputError("argument --pack-slowdown", "needs --pack")
    try:
        return MechanismOptions(migrate=migrate, time_slice=time_slice, pack=pack, costs=costs,
                                pack_slowdown=(PACK_SLOWDOWN if pack_slowdown is None
                                               else pack_slowdown))
    except ValueError as err:
        raise flag_error(err, FLAGS)


def simulate_config(args: argparse.Namespace) -> SimulateConfig:
    """The namespace as a SimulateConfig, its field errors named by their flags (every
    field is the flag's namesake but policies, ga, network and mechanisms)."""
    from dataclasses import fields

    if args.migrate and not args.preemption_cost:
        raise InputError("argument --migrate", "needs --preemption-cost measured|zero")
    given = {f.name: getattr(args, f.name) for f in fields(SimulateConfig)
             if f.name in vars(args)}
    try:
        mech = mechanism_options(migrate=args.migrate, time_slice=args.time_slice,
                                 pack=args.pack, pack_slowdown=args.pack_slowdown,
                                 costs=args.preemption_cost)
        return SimulateConfig(**{**given, "policies": tuple(parse_policy_names(args.policies)),
                                 "ga": not args.no_ga, "network": not args.no_network,
                                 "priority": None if args.priority == "off" else args.priority,
                                 "mechanisms": mech})
    except ValueError as err:
        raise flag_error(err, SIMULATE_FLAGS)


def run_simulate(args: argparse.Namespace) -> int:
    from job_scheduler.simulation.compare import simulate

    config = simulate_config(args)
    try:
        return simulate(config)
    except InputError as err:       # an option's field (trace_format, ...) -> its flag
        raise flag_error(err, SIMULATE_FLAGS)
