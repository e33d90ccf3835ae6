"""``sluice run`` and ``sluice demo``: YAML jobs scheduled (Proteus + Liquid, or a
baseline) onto the emulated two-rack (or any) fabric, run as real PS jobs, their flows
prioritised by the controller; a report with tables and plots at the end.

    sluice run JOBS.yaml --topology two-rack [--policy lyapunov] [--priority on|off]
               [--out DIR] [--slot 1] [--batches N]
    sluice demo [--out DIR]          # two-rack, sluice/data/demo_jobs.yaml, off then on

Everything is validated before anything starts (bad input: exit 2, nothing started).
Then: the controller process, the fabric (global fabric lock), the real-time loop of
``sluice.runloop``; all of them are stopped on the way out, Ctrl-C included.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path

from controller.job_rank import DEFAULT_RULE, RANK_RULES
from sluice.errors import InputError

DEMO_JOBS = Path(__file__).resolve().parent / "data" / "demo_jobs.yaml"
# las is not offered: it preempts running jobs, which real PS jobs without checkpoints
# (and the scheduler service's policy seam) do not support.
POLICY_NAMES = ("lyapunov", "single", "random", "fifo", "tetris")


def _common(parser) -> None:
    parser.add_argument("--out", default=None, help="report directory (default runs/<command>-<time>)")
    parser.add_argument("--slot", type=float, default=1.0, help="scheduling slot, seconds (default 1)")
    parser.add_argument("--batches", type=int, default=None,
                        help="batches per worker (default: epochs*dataset_size/(batch_size*GPUs))")
    parser.add_argument("--input-size", type=int, default=64,
                        help="image size for resnet18/alexnet/vgg16/googlenet (default 64; smallcnn is 28x28)")
    parser.add_argument("--job-timeout", type=float, default=900.0, help="seconds before a job is stopped")
    parser.add_argument("--rank", default=DEFAULT_RULE, choices=RANK_RULES,
                        help=f"controller ranking rule when priority is on (default {DEFAULT_RULE}: "
                             "shortest remaining bytes first)")


def configure_run(parser) -> None:
    parser.add_argument("jobs", help="job description YAML (see job_scheduler/jobspec.py)")
    parser.add_argument("--topology", default="two-rack", help="built-in name or YAML path")
    parser.add_argument("--policy", default="lyapunov", help=f"one of {', '.join(POLICY_NAMES)}")
    parser.add_argument("--priority", default="on", help="on|off: progress-aware flow priority")
    _common(parser)


def configure_demo(parser) -> None:
    parser.add_argument("--policy", default="lyapunov", help=f"one of {', '.join(POLICY_NAMES)}")
    _common(parser)


# ---- validation (no side effects) --------------------------------------------------------

def validate(jobs_path: str | Path, topology_arg: str, args, priority: str = "on"):
    """-> (jobs, topology); InputError on anything wrong."""
    from job_scheduler.jobspec import load_jobs
    from ps_runtime.models import MODEL_NAMES
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
    for job in jobs:
        if job.model not in MODEL_NAMES:
            raise InputError(str(jobs_path), f"'{job.model}' cannot be trained by the PS runtime "
                             f"(trainable: {', '.join(MODEL_NAMES)})", element=f"job '{job.name}'",
                             field="model")
        if job.max_gpus > topology.total_gpus:
            raise InputError(str(jobs_path), f"must be <= the {topology.total_gpus} GPUs of "
                             f"topology '{topology.name}', got {job.max_gpus}",
                             element=f"job '{job.name}'", field="max_gpus")
        if job.num_ps > len(topology.hosts):
            raise InputError(str(jobs_path), f"must be <= the {len(topology.hosts)} hosts of "
                             f"topology '{topology.name}'", element=f"job '{job.name}'", field="num_ps")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError("argument --out", f"{args.out} exists and is not a directory")
    return jobs, topology


def _out_dir(args, command: str) -> Path:
    return Path(args.out) if args.out else Path("runs") / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}"


# ---- the environment: controller process + fabric -----------------------------------------

@contextmanager
def environment(topology, topology_arg: str, out: Path, rank: str | None = None,
                **fabric_options):
    """Controller process (ranking rule ``rank``), then the fabric connected to it; both
    stopped on exit."""
    from mininet_tests.fabric import Fabric
    from sluice.controller_proc import controller_process

    print(f"sluice: starting the controller for {topology.name}", file=sys.stderr, flush=True)
    with controller_process(topology_arg, out / "controller.log", rank=rank) as (ofp, client):
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


def one_pass(topology, jobs, fabric, client, out: Path, args, priority: bool, port_base: int):
    from job_scheduler.estimator import Estimator, nominal_bandwidth
    from job_scheduler.service_policy import make_policy
    from sluice.runloop import RealTimeRun, RunOptions

    estimator = Estimator(nominal_bw_mbps=nominal_bandwidth(topology))
    policy = make_policy(args.policy, topology, estimator)
    options = RunOptions(priority=priority, slot_s=args.slot, batches=args.batches,
                         input_size=args.input_size, job_timeout_s=args.job_timeout,
                         port_base=port_base)
    return RealTimeRun(topology, jobs, policy, estimator, fabric, client, out, options,
                       policy_name=args.policy).run()


# ---- commands ----------------------------------------------------------------------------

def run_run(args) -> int:
    from sluice.report import write_report

    jobs, topology = validate(args.jobs, args.topology, args, args.priority)
    out = _out_dir(args, "run")
    out.mkdir(parents=True, exist_ok=True)
    with environment(topology, args.topology, out, args.rank) as (fabric, client):
        result = one_pass(topology, jobs, fabric, client, out, args, args.priority == "on", 20000)
    md = write_report(result, out)
    print(md.read_text())
    print(f"report: {md}", file=sys.stderr)
    if result["interrupted"]:
        print("sluice run: interrupted; the report covers what ran", file=sys.stderr)
        return 130
    return 0 if result["summary"]["finished"] == len(jobs) else 1


def _crosses_fabric(job: dict) -> bool:
    """True when a job's PS and workers are not all on one host."""
    return len(set(job.get("ps_hosts", [])) | set(job.get("worker_hosts", []))) > 1


def run_demo(args) -> int:
    import json

    from sluice.report import comparison, comparison_markdown, write_report

    jobs, topology = validate(DEMO_JOBS, "two-rack", args)
    out = _out_dir(args, "demo")
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results = {}
    with environment(topology, "two-rack", out, args.rank) as (fabric, client):
        for k, mode in enumerate(("off", "on")):
            print(f"sluice demo: pass {k + 1}/2, priority {mode}", file=sys.stderr, flush=True)
            results[mode] = one_pass(topology, jobs, fabric, client, out / f"priority-{mode}", args,
                                     mode == "on", 20000 + 4000 * k)
            write_report(results[mode], out / f"priority-{mode}")
            if results[mode]["interrupted"]:
                print(f"sluice demo: interrupted; partial report in {out / f'priority-{mode}'}",
                      file=sys.stderr)
                return 130
    wall = time.monotonic() - started
    cmp = comparison(results["off"], results["on"])
    cmp["wall_time_s"] = round(wall, 1)
    (out / "comparison.json").write_text(json.dumps(cmp, indent=1))
    text = (f"# sluice demo: two-rack, {len(jobs)} jobs, policy {args.policy}, priority off vs on\n\n"
            + comparison_markdown(cmp) + f"\n\nwall time {wall:.0f} s\n")
    if not any(_crosses_fabric(job) for r in results.values() for job in r["jobs"]):
        # Say so rather than let a reader take noise for an effect of priority.
        text += ("\nNote: the scheduler kept every job's PS and workers on one host, so no PS "
                 "traffic crossed the fabric and priority had nothing to act on; the "
                 "differences above are run-to-run noise. `mininet_tests/experiment_priority.py` "
                 "forces contention on a rack uplink.\n")
    (out / "comparison.md").write_text(text)
    print(text)
    print(f"reports: {out}/priority-off/report.md, {out}/priority-on/report.md, {out}/comparison.md")
    ok = all(r["summary"]["finished"] == len(jobs) for r in results.values())
    return 0 if ok else 1
