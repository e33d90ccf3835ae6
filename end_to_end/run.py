"""``sluice run`` and ``sluice demo``: YAML jobs scheduled (Proteus + Liquid, or a
baseline) onto the emulated two-rack (or any) fabric, run as real PS jobs, their flows
prioritised by the controller; a report with tables and plots at the end.

    sluice run JOBS.yaml --topology two-rack [--policy lyapunov] [--priority on|off]
               [--out DIR] [--slot 1] [--batches N] [--compute torch|emulated] [--profile FILE]
    sluice demo [--out DIR]          # two-rack-100g, end_to_end/data/demo_jobs.yaml, off then on

Compute: ``torch`` (real) or ``emulated`` (Cost_bat(b) of the profile, the model's bytes x
bw_scale; the default without a CUDA device). Job processes come from a per-host pool of
pre-started ones (ps_runtime.warm).

Everything is validated before anything starts (bad input: exit 2, nothing started).
Then: the controller process, the fabric (global fabric lock), the real-time loop of
``end_to_end.runloop``; all of them are stopped on the way out, Ctrl-C included.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from controller.job_rank import DEFAULT_RULE, RANK_RULES
from job_scheduler.policies import DEFAULT_LAS_THRESHOLDS, POLICY_NAMES, REGISTRY
from sluice_common.errors import InputError

DEMO_JOBS = Path(__file__).resolve().parent / "data" / "demo_jobs.yaml"
# 100 Gbit/s hosts, 50 Gbit/s uplinks: on the measured H100 profile a job's Comm(n) across
# racks is then comparable to its compute, so the Proteus decision is not trivial (see
# topologies/builtin/two-rack-100g.yaml).
DEMO_TOPOLOGY = "two-rack-100g"
# Every policy of the registry: las and sluice suspend running jobs at batch boundaries
# and resume them from their checkpoints (end_to_end.suspend).
WARM_PER_HOST = 8        # pre-started processes per host: a job is 3-9 processes, and two
                         # jobs may start on one host within seconds (the refills import at nice 19)


def _common(parser) -> None:
    parser.add_argument("--out", default=None, help="report directory (default runs/<command>-<time>)")
    parser.add_argument("--slot", type=float, default=1.0, help="scheduling slot, seconds (default 1)")
    parser.add_argument("--batches", type=int, default=None,
                        help="batches per worker (default: epochs*dataset_size/(batch_size*GPUs))")
    parser.add_argument("--input-size", type=int, default=64,
                        help="image size for resnet18/alexnet/vgg16/googlenet (default 64; smallcnn is 28x28)")
    parser.add_argument("--job-timeout", type=float, default=900.0, help="seconds before a job is stopped")
    from ps_runtime.compute import add_arguments

    add_arguments(parser)
    parser.add_argument("--rank", default=DEFAULT_RULE, choices=RANK_RULES,
                        help=f"controller ranking rule when priority is on (default {DEFAULT_RULE}: "
                             "shortest remaining bytes first)")


def configure_run(parser) -> None:
    parser.add_argument("jobs", help="job description YAML (see sluice_common/jobspec.py)")
    parser.add_argument("--topology", default="two-rack", help="built-in name or YAML path")
    parser.add_argument("--policy", default="lyapunov", help=f"one of {', '.join(POLICY_NAMES)}")
    parser.add_argument("--priority", default="on", help="on|off: flow priority by the --rank rule")
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
    from job_scheduler.cli import add_sharing_arguments

    add_sharing_arguments(parser, "job_scheduler/mechanisms.py; not with las")
    parser.add_argument("--dry-run", action="store_true",
                        help="make the run's decisions with the job durations the estimator "
                             "predicts and print each slot's plan (starts, suspends, "
                             "placements): no fabric, no process")


def configure_demo(parser) -> None:
    parser.add_argument("--policy", default="lyapunov", help=f"one of {', '.join(POLICY_NAMES)}")
    _common(parser)


# ---- validation (no side effects) --------------------------------------------------------

def validate(jobs_path: str | Path, topology_arg: str, args, priority: str = "on"):
    """-> (jobs, topology); InputError on anything wrong. Sets ``args.compute`` (auto
    resolved) and ``args.compute_info``."""
    from sluice_common.jobspec import load_jobs
    from sluice_common.models import MODELS
    from ps_runtime.compute import describe, resolve_compute
    from topologies import load_topology
    from topologies.mininet_topo import check_emulatable

    if args.policy not in POLICY_NAMES:
        raise InputError("argument --policy", f"unknown policy {args.policy!r} (known: {', '.join(POLICY_NAMES)})")
    if priority not in ("on", "off"):
        raise InputError("argument --priority", f"must be 'on' or 'off', got {priority!r}")
    if not args.slot > 0 or args.slot > 600:
        raise InputError("argument --slot", f"must be in (0, 600] seconds, got {args.slot}")
    if args.batches is not None and args.batches < 1:
        raise InputError("argument --batches", f"must be >= 1, got {args.batches}")
    if not 16 <= args.input_size <= 512:
        raise InputError("argument --input-size", f"must be 16..512, got {args.input_size}")
    if not args.job_timeout > 0:
        raise InputError("argument --job-timeout", f"must be > 0, got {args.job_timeout}")
    topology = load_topology(topology_arg)
    check_emulatable(topology)
    jobs = load_jobs(jobs_path)
    args.compute = resolve_compute(getattr(args, "compute", None))
    args.compute_info = describe(args.compute, getattr(args, "profile", None))
    if args.compute == "torch":
        from ps_runtime.models import MODEL_NAMES
    else:                       # the emulated worker needs a parameter count and a profile
        MODEL_NAMES = tuple(MODELS)
    for job in jobs:
        if job.model not in MODEL_NAMES:
            raise InputError(str(jobs_path), f"'{job.model}' cannot be run by the PS runtime "
                             f"with {args.compute} compute (runnable: {', '.join(MODEL_NAMES)})",
                             element=f"job '{job.name}'", field="model")
        if job.max_gpus > topology.total_gpus:
            raise InputError(str(jobs_path), f"must be <= the {topology.total_gpus} GPUs of "
                             f"topology '{topology.name}', got {job.max_gpus}",
                             element=f"job '{job.name}'", field="max_gpus")
        if job.num_ps > len(topology.hosts):
            raise InputError(str(jobs_path), f"must be <= the {len(topology.hosts)} hosts of "
                             f"topology '{topology.name}'", element=f"job '{job.name}'", field="num_ps")
    mechanism_options(args)     # --las-threshold, --time-slice, --pack, --migrate
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError("argument --out", f"{args.out} exists and is not a directory")
    return jobs, topology


def mechanism_options(args):
    """The run's MechanismOptions (the measured cost table when any is on)."""
    from job_scheduler.cli import mechanism_options as options

    if not getattr(args, "las_threshold", 1.0) > 0:
        raise InputError("argument --las-threshold", f"must be > 0, got {args.las_threshold}")
    if not hasattr(args, "migrate"):        # sluice demo: none of them
        from job_scheduler.mechanisms import MechanismOptions
        return MechanismOptions()
    opts = options(args, None, [args.policy], "argument --policy")
    return dataclasses.replace(opts, costs="measured") if opts.build() else opts


def run_policy(args):
    """The policy object of a run (a fresh one per pass: policies keep per-run state)."""
    from job_scheduler.policies import make_policy

    return make_policy(args.policy, seed=getattr(args, "seed", 0),
                       las_thresholds=(getattr(args, "las_threshold",
                                               DEFAULT_LAS_THRESHOLDS[0]),))


def _out_dir(args, command: str) -> Path:
    return Path(args.out) if args.out else Path("runs") / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}"


# ---- the environment: controller process + fabric -----------------------------------------

@contextmanager
def environment(topology, topology_arg: str, out: Path, rank: str | None = None,
                **fabric_options):
    """Controller process (ranking rule ``rank``), then the fabric connected to it; both
    stopped on exit."""
    from mininet_fabric.fabric import Fabric
    from end_to_end.controller_proc import controller_process

    print(f"sluice: starting the controller for {topology.name}", file=sys.stderr, flush=True)
    with controller_process(topology_arg, out / "controller.log", rank=rank) as (ofp, client):
        print(f"sluice: live picture at {client.url}/live (metrics: {client.url}/metrics)",
              file=sys.stderr, flush=True)
        with Fabric(topology, controller=ofp, **fabric_options) as fabric:
            _wait_hosts_located(fabric, client)
            yield fabric, client


def _wait_hosts_located(fabric, client, timeout: float = 20.0) -> None:
    """The controller learns where hosts are from ARP; a ping round teaches it all."""
    deadline = time.monotonic() + timeout
    while True:
        loss = fabric.ping_all()
        if loss == 0.0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the fabric does not forward under the controller ({loss:.0f}% ping loss)")
        time.sleep(0.5)


def say_compute(args, command: str) -> None:
    info = args.compute_info
    print(f"sluice {command}: compute {info['compute']}, device {info['device']}, profile "
          f"{info['profile']}", file=sys.stderr, flush=True)


def run_estimator(topology, args):
    """The estimator of a real run: the chosen profile, the topology's nominal bandwidth
    and the PS runtime's own terms (start-up, per-round sync, link efficiency)."""
    from job_scheduler.estimator import Estimator, nominal_bandwidth
    from ps_runtime.calibration import runtime_terms

    return Estimator(args.profile, nominal_bw_mbps=nominal_bandwidth(topology),
                     **runtime_terms(args.compute))


@contextmanager
def warm_processes(topology, fabric, out: Path, compute: str):
    """A pool of pre-started PS processes per host (ps_runtime.warm) for the whole run."""
    from ps_runtime.runners import MininetRunner
    from ps_runtime.warm import WarmRunner

    preload = ("mxnet",) if compute == "emulated" else ("mxnet", "torch")
    runner = WarmRunner(MininetRunner(fabric), [h.name for h in topology.hosts],
                        per_host=WARM_PER_HOST, preload=preload)
    t0 = time.monotonic()
    ready = runner.wait_ready()
    print(f"sluice: {ready} PS processes pre-started on {len(topology.hosts)} hosts "
          f"({', '.join(preload)} imported) in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    try:
        yield runner
    finally:
        runner.close()
        print(f"sluice: {runner.taken} processes started warm, {runner.cold} cold",
              file=sys.stderr, flush=True)


def one_pass(topology, jobs, fabric, client, out: Path, args, priority: bool, port_base: int,
             runner=None):
    from end_to_end.runloop import RealTimeRun, RunOptions
    from job_scheduler.preemption import load_costs

    estimator = run_estimator(topology, args)
    mech = mechanism_options(args)
    options = RunOptions(priority=priority, slot_s=args.slot, batches=args.batches,
                         input_size=args.input_size, job_timeout_s=args.job_timeout,
                         port_base=port_base, compute=args.compute, profile=args.profile,
                         compute_info=args.compute_info)
    from sluice_common.progress import LiveStatus
    loop = RealTimeRun(topology, jobs, run_policy(args), estimator, fabric, client, out, options,
                       policy_name=args.policy, runner=runner, mechanisms=mech.build(),
                       costs=load_costs(mech.costs),
                       can_suspend=REGISTRY[args.policy].preemptive)
    with LiveStatus() as loop.status:
        return loop.run()


# ---- commands ----------------------------------------------------------------------------

def run_run(args) -> int:
    from end_to_end.report import write_report

    jobs, topology = validate(args.jobs, args.topology, args, args.priority)
    if args.dry_run:
        return dry_run(jobs, topology, args)
    say_compute(args, "run")
    from end_to_end.estimate import announce
    announce(jobs, topology, args.policy, args.batches,
             lambda line: print(f"sluice run: {line}", file=sys.stderr, flush=True),
             estimator=run_estimator(topology, args))
    out = _out_dir(args, "run")
    out.mkdir(parents=True, exist_ok=True)
    with environment(topology, args.topology, out, args.rank) as (fabric, client), \
            warm_processes(topology, fabric, out, args.compute) as runner:
        result = one_pass(topology, jobs, fabric, client, out, args, args.priority == "on", 20000,
                          runner)
    md = write_report(result, out)
    print(md.read_text())
    print(f"report: {md}", file=sys.stderr)
    if result["interrupted"]:
        print("sluice run: interrupted; the report covers what ran", file=sys.stderr)
        return 130
    return 0 if result["summary"]["finished"] == len(jobs) else 1


def dry_plans(jobs, topology, args):
    """The run's decisions with the job durations the estimator predicts: the simulator
    (the same ``decide_slot``, policy and mechanisms) on the run's estimator, slot and
    idle-fabric bandwidth. -> (job names by key, [(time, SlotPlan)])."""
    from job_scheduler.preemption import load_costs
    from job_scheduler.simulator import Simulator

    mech = mechanism_options(args)
    plans: list = []
    sim = Simulator(topology, jobs, run_policy(args), estimator=run_estimator(topology, args),
                    slot=args.slot, bandwidth="idle", mechanisms=mech.build(),
                    costs=load_costs(mech.costs), on_plan=lambda t, p: plans.append((t, p)))
    sim.run()
    return [j.name for j in sim.jobs], plans


def dry_run(jobs, topology, args) -> int:
    """``sluice run --dry-run``: print each slot's plan; no fabric, no process."""
    names, plans = dry_plans(jobs, topology, args)
    print(f"sluice run --dry-run: {len(jobs)} jobs on {topology.name}, policy {args.policy}, "
          f"slot {args.slot:g} s (job durations: the estimator's predictions)")
    for t, plan in plans:
        for line in plan.lines(names):
            print(f"{t:9.1f} s  {line}")
    return 0


@contextmanager
def _timed():
    yield time.monotonic()


def _crosses_fabric(job: dict) -> bool:
    """True when a job's PS and workers are not all on one host."""
    return len(set(job.get("ps_hosts", [])) | set(job.get("worker_hosts", []))) > 1


def run_demo(args) -> int:
    import json

    from end_to_end.report import comparison, comparison_markdown, demo_summary, write_report

    from mininet_fabric.lock import FabricLock

    asked = time.monotonic()
    jobs, topology = validate(DEMO_JOBS, DEMO_TOPOLOGY, args)
    say_compute(args, "demo")
    out = _out_dir(args, "demo")
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    # Taken first (the Fabric below nests in it) so that the wall time does not count
    # the wait for other users of the machine's one fabric.
    with FabricLock(f"sluice demo {out}"), \
            _timed() as started, \
            environment(topology, DEMO_TOPOLOGY, out, args.rank) as (fabric, client), \
            warm_processes(topology, fabric, out, args.compute) as runner:
        lock_wait = started - asked
        for k, mode in enumerate(("off", "on")):
            runner.wait_ready()           # every pass starts with a full pool
            print(f"sluice demo: pass {k + 1}/2, priority {mode}", file=sys.stderr, flush=True)
            results[mode] = one_pass(topology, jobs, fabric, client, out / f"priority-{mode}", args,
                                     mode == "on", 20000 + 4000 * k, runner)
            write_report(results[mode], out / f"priority-{mode}")
            if results[mode]["interrupted"]:
                print(f"sluice demo: interrupted; partial report in {out / f'priority-{mode}'}",
                      file=sys.stderr)
                return 130
    wall = time.monotonic() - started
    cmp = comparison(results["off"], results["on"])
    cmp.update(args.compute_info, wall_time_s=round(wall, 1), topology=topology.name,
               fabric_lock_wait_s=round(lock_wait, 1))
    (out / "comparison.json").write_text(json.dumps(cmp, indent=1))
    text = (f"# sluice demo: {topology.name}, {len(jobs)} jobs, policy {args.policy}, "
            f"{cmp['compute']} compute, priority off vs on\n\n"
            + comparison_markdown(cmp) + f"\n\n{demo_summary(cmp)}\n\nwall time {wall:.0f} s"
            + (f" (after {lock_wait:.0f} s waiting for the fabric lock)" if lock_wait >= 1 else "")
            + "\n")
    (out / "comparison.md").write_text(text)
    print(text)
    print(f"reports: {out}/priority-off/report.md, {out}/priority-on/report.md, {out}/comparison.md")
    ok = all(r["summary"]["finished"] == len(jobs) for r in results.values())
    return 0 if ok else 1
