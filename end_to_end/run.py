"""``sluice run`` and ``sluice demo``: YAML jobs scheduled (Proteus + Liquid, or a
baseline) onto the emulated two-rack (or any) fabric, run as real PS jobs, their flows
prioritised by the controller; a report with tables and plots at the end.

    sluice run JOBS.yaml --topology two-rack [--policy lyapunov] [--priority on|off]
               [--out DIR] [--slot 1] [--batches N] [--compute torch|emulated] [--profile FILE]
    sluice demo [--arms a,b,c,d] [--out DIR]     # end_to_end.demo_arms: four arms, one workload

Compute: ``torch`` (real) or ``emulated`` (Cost_bat(b) of the profile, the model's bytes x
bw_scale; the default without a CUDA device). Job processes come from a per-host pool of
pre-started ones (ps_runtime.warm), forked from one fork server per host that imported
MXNet once (ps_runtime.zygote).

Everything is validated before anything starts (bad input: exit 2, nothing started):
the command line once into a ``RunConfig`` (``end_to_end.cli``), the files here. Then:
the controller process, the fabric (global fabric lock), the real-time loop of
``end_to_end.runloop``; all of them are stopped on the way out, Ctrl-C included.
``--dry-run`` makes the run's decisions without any of them (``dry_run``).
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sluice_common.rank_rules import DEFAULT_RULE
from job_scheduler.core.mechanisms import MechanismOptions
from job_scheduler.core.policies import DEFAULT_LAS_THRESHOLDS, POLICY_NAMES, REGISTRY
from sluice_common.errors import InputError

DEMO_JOBS = Path(__file__).resolve().parent / "data" / "demo_jobs.yaml"
# 100 Gbit/s hosts, 50 Gbit/s uplinks: on the measured H100 profile a job's Comm(n) across
# racks is then comparable to its compute, so the Proteus decision is not trivial (see
# topologies/builtin/two-rack-100g.yaml).
DEMO_TOPOLOGY = "two-rack-100g"
WARM_PER_HOST = 8        # pre-started processes per host when there is no plan: a job is 3-9
                         # processes, and two jobs may start on one host within seconds (the
                         # refills import at nice 19); with a plan, each host's pool is what its
                         # planned jobs take (ps_runtime.warm.pool_sizes)


@dataclass(frozen=True)
class RunConfig:
    """What ``sluice run`` and ``sluice demo`` are asked, as one frozen value: built once
    from the command line (``end_to_end.cli``) and handed down; nothing below the CLI
    reads the argparse namespace. Its checks raise ``ValueError("field: message")``;
    only the CLI turns a field into its flag."""
    jobs: str                            # job YAML
    topology: str                        # built-in name or YAML path
    policy: str = "lyapunov"
    placement: str | None = None         # the policy's placement swapped (sluice demo's arms)
    price_priority: str | None = None    # sluice: price placements under this rule (None: off)
    priority: str = "on"                 # on | off: flow priority by the rank rule
    rank: str = DEFAULT_RULE
    out: str | None = None               # report directory
    slot: float = 1.0                    # seconds
    batches: int | None = None           # per worker; None: epochs * dataset / (batch * n)
    input_size: int = 64
    job_timeout: float = 900.0           # seconds
    compute: str = "emulated"            # torch | emulated (resolved)
    profile: str | None = None
    compute_info: dict = field(default_factory=dict, compare=False)
    seed: int = 0
    las_threshold: float = DEFAULT_LAS_THRESHOLDS[0]   # GPU-seconds
    mechanisms: MechanismOptions = MechanismOptions()
    dry_run: bool = False

    def __post_init__(self):
        checks = [
            ("policy", self.policy in POLICY_NAMES,
             f"unknown policy {self.policy!r} (known: {', '.join(POLICY_NAMES)})"),
            ("priority", self.priority in ("on", "off"),
             f"must be 'on' or 'off', got {self.priority!r}"),
            ("slot", 0 < self.slot <= 600, f"must be in (0, 600] seconds, got {self.slot}"),
            ("batches", self.batches is None or self.batches >= 1,
             f"must be >= 1, got {self.batches}"),
            ("input_size", 16 <= self.input_size <= 512, f"must be 16..512, got {self.input_size}"),
            ("job_timeout", self.job_timeout > 0, f"must be > 0, got {self.job_timeout}"),
            ("las_threshold", self.las_threshold > 0, f"must be > 0, got {self.las_threshold}")]
        for name, ok, message in checks:
            if not ok:
                raise ValueError(f"{name}: {message}")
        from job_scheduler.core.policies import check_price_priority

        check_price_priority(self.price_priority, self.policy)    # InputError on its field
        self.mechanisms.check(self.policy)

    def make_policy(self):
        """A fresh policy object (policies keep per-run state: one per pass)."""
        from job_scheduler.core.policies import make_policy

        return make_policy(self.policy, seed=self.seed, las_thresholds=(self.las_threshold,),
                           placement=self.placement, price_priority=self.price_priority)


# ---- validation (no side effects) --------------------------------------------------------

def validate(config: RunConfig):
    """-> (jobs, topology) of ``config``; InputError on anything wrong with the files."""
    from sluice_common.jobspec import load_jobs
    from sluice_common.models import MODELS
    from topologies import load_topology
    from topologies.mininet_topo import check_emulatable

    topology = load_topology(config.topology)
    check_emulatable(topology)
    jobs = load_jobs(config.jobs)
    if config.compute == "torch":
        from ps_runtime.models import MODEL_NAMES
    else:                       # the emulated worker needs a parameter count and a profile
        MODEL_NAMES = tuple(MODELS)
    for job in jobs:
        for field_, bad, message in (
                ("model", job.model not in MODEL_NAMES, f"'{job.model}' cannot be run by the "
                 f"PS runtime with {config.compute} compute (runnable: {', '.join(MODEL_NAMES)})"),
                ("max_gpus", job.max_gpus > topology.total_gpus, f"must be <= the "
                 f"{topology.total_gpus} GPUs of topology '{topology.name}', got {job.max_gpus}"),
                ("num_ps", job.num_ps > len(topology.hosts), f"must be <= the "
                 f"{len(topology.hosts)} hosts of topology '{topology.name}'")):
            if bad:
                raise InputError(str(config.jobs), message, element=f"job '{job.name}'",
                                 field=field_)
    if config.out and Path(config.out).exists() and not Path(config.out).is_dir():
        raise InputError(config.out, "exists and is not a directory", field="out")
    return jobs, topology


def out_dir(config: RunConfig, command: str) -> Path:
    return (Path(config.out) if config.out
            else Path("runs") / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}")


# ---- the environment: controller process + fabric -----------------------------------------

@contextmanager
def environment(topology, topology_arg: str, out: Path, rank: str | None = None,
                controller_args: tuple[str, ...] = (), **fabric_options):
    """The management network, the controller process (ranking rule ``rank``, more
    ``controller_args``) with its API on it, then the fabric connected to the controller,
    its hosts on the management network (every worker reports its progress itself, as on
    a real cluster: mininet_fabric/management.py); all stopped on exit."""
    from mininet_fabric.fabric import Fabric
    from mininet_fabric.management import ManagementNet
    from end_to_end.controller_proc import controller_process

    print(f"sluice: starting the controller for {topology.name}", file=sys.stderr, flush=True)
    with ManagementNet() as mgmt, \
            controller_process(topology_arg, out / "controller.log", rank=rank,
                               extra_args=controller_args, api_host=mgmt.address) as (ofp, client):
        print(f"sluice: live picture at {client.url}/live (metrics: {client.url}/metrics)",
              file=sys.stderr, flush=True)
        with Fabric(topology, controller=ofp, management=mgmt, **fabric_options) as fabric:
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


def say_compute(config: RunConfig, command: str) -> None:
    info = config.compute_info
    print(f"sluice {command}: compute {info['compute']}, device {info['device']}, profile "
          f"{info['profile']}", file=sys.stderr, flush=True)


def run_estimator(topology, compute: str, profile: str | None = None):
    """The estimator of a real run: the chosen profile, the topology's nominal bandwidth,
    the PS runtime's start-up, and the exchange model priced on the emulated fabric the
    run uses (``ExchangePricing.for_topology(emulated=True)``): the same model and the same
    committed constants as the predictions (``end_to_end/predict.py``), and the server's
    time per worker and batch measured on the demo's runs. Its fixed time
    per batch stands for the runtime's ``sync_s``, its ``efficiency`` for the link
    efficiency and its loopback for the in-host bus."""
    from job_scheduler.core.estimator import Estimator, nominal_bandwidth
    from job_scheduler.core.exchange_pricing import ExchangePricing
    from ps_runtime.calibration import runtime_terms, server_per_worker_s

    return Estimator(profile, nominal_bw_mbps=nominal_bandwidth(topology),
                     startup_s=runtime_terms(compute)["startup_s"],
                     exchange=ExchangePricing.for_topology(topology, emulated=True),
                     server_per_worker_s=server_per_worker_s())


def warm_pool_sizes(topology, planned: list[dict] | None) -> dict[str, int] | int:
    """Each host's warm pool for a pass whose jobs start as ``planned`` (the dry run's
    placements, ``end_to_end.model_run``' records): every process they will take on that host plus a
    spare (WARM_PER_HOST everywhere without a plan)."""
    from ps_runtime.warm import pool_sizes, processes_per_host

    if not planned:
        return WARM_PER_HOST
    demand = processes_per_host((r["ps_hosts"], r["worker_hosts"]) for r in planned)
    return pool_sizes([h.name for h in topology.hosts], demand)


@contextmanager
def warm_processes(topology, fabric, compute: str, planned: list[dict] | None = None,
                   refill: bool = True, per_host: int | None = None, timeout_s: float = 90.0,
                   fork: bool = False):
    """A pool of pre-started PS processes per host (ps_runtime.warm) for the whole run,
    sized by ``planned`` (:func:`warm_pool_sizes`), or ``per_host`` processes on every host
    (an experiment that knows its largest pass). ``refill`` False: a process handed to
    a job is replaced only by ``runner.fill()``, which a caller that measures passes runs
    between them. Refilling during a pass imports MXNet in ~30 processes at once; even at
    nice 19 that keeps a host with two cores at 0 % idle and doubled the demo's cross-rack
    jobs' batches there (0.22 s against 0.09 s without it, 2026-11-27; docs/design.md,
    "The test machine"). ``fork``: the pool's
    processes are forked from one fork server per host (``ps_runtime.zygote``), which
    imports once: a fill takes milliseconds, and a dry pool forks rather than starting a
    process cold."""
    from ps_runtime.runners import MininetRunner
    from ps_runtime.warm import WarmRunner

    preload = ("mxnet",) if compute == "emulated" else ("mxnet", "torch")
    runner = WarmRunner(MininetRunner(fabric), [h.name for h in topology.hosts],
                        per_host=per_host or warm_pool_sizes(topology, planned),
                        preload=preload, refill=refill, fork=fork)
    t0 = time.monotonic()
    ready = runner.wait_ready(timeout=timeout_s)
    print(f"sluice: {ready} PS processes pre-started on {len(topology.hosts)} hosts "
          f"({', '.join(preload)} imported) in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    try:
        yield runner
    finally:
        runner.close()
        late = f" ({runner.forked_late} forked at hand-over)" if fork else ""
        print(f"sluice: {runner.taken} processes started warm{late}, {runner.cold} cold",
              file=sys.stderr, flush=True)


def one_pass(topology, jobs, fabric, client, out: Path, config: RunConfig, priority: bool,
             port_base: int, runner=None):
    from end_to_end.runloop import RealTimeRun
    from end_to_end.run_options import RunOptions
    from job_scheduler.core.preemption import load_costs
    from sluice_common.progress import LiveStatus

    c = config
    options = RunOptions(priority=priority, slot_s=c.slot, batches=c.batches,
                         input_size=c.input_size, job_timeout_s=c.job_timeout,
                         port_base=port_base, compute=c.compute, profile=c.profile,
                         compute_info=c.compute_info)
    loop = RealTimeRun(topology, jobs, c.make_policy(), run_estimator(topology, c.compute, c.profile),
                       fabric, client, out, options, policy_name=c.policy, runner=runner,
                       mechanisms=c.mechanisms.build(), costs=load_costs(c.mechanisms.costs),
                       can_suspend=REGISTRY[c.policy].preemptive)
    with LiveStatus() as loop.status:
        return loop.run()


# ---- commands ----------------------------------------------------------------------------

def run(config: RunConfig) -> int:
    """``sluice run``: the jobs on the fabric, a report; 0 when every job finished."""
    from end_to_end.estimate import describe, estimate_run
    from end_to_end.report import write_report

    jobs, topology = validate(config)
    if config.dry_run:
        return dry_run(jobs, topology, config)
    say_compute(config, "run")
    # the estimate (and warnings), with the run's own estimator (its profile and runtime
    # terms), or why there is none: the run still goes ahead
    estimator = run_estimator(topology, config.compute, config.profile)
    try:
        lines = describe(estimate_run(jobs, topology, estimator, config.policy, config.batches,
                                          config.price_priority))
    except Exception as err:      # an estimate must never stop the run itself
        lines = [f"no estimate ({type(err).__name__}: {err})"]
    for line in lines:
        print(f"sluice run: {line}", file=sys.stderr, flush=True)
    out = out_dir(config, "run")
    out.mkdir(parents=True, exist_ok=True)
    with environment(topology, config.topology, out, config.rank) as (fabric, client), \
            warm_processes(topology, fabric, config.compute, fork=True) as runner:
        result = one_pass(topology, jobs, fabric, client, out, config, config.priority == "on",
                          20000, runner)
    md = write_report(result, out)
    print(md.read_text())
    print(f"report: {md}", file=sys.stderr)
    if result["interrupted"]:
        print("sluice run: interrupted; the report covers what ran", file=sys.stderr)
        return 130
    return 0 if result["summary"]["finished"] == len(jobs) else 1


def simulator(jobs, topology, config: RunConfig, on_plan=None, bandwidth: str = "idle",
              priority: str | None = None, share: str = "senders"):
    """The simulator of the run's policy, mechanisms, estimator and slot, the job
    durations the estimator predicts: the simulator's trust check
    (``end_to_end.demo_trust``) builds it with the uplinks shared (``bandwidth="shared"``)
    and strict ``priority`` by the controller's rule, as ``sluice simulate`` prices a
    fabric, each uplink's rate split among the senders busy at once (``share="senders"``),
    as the exchange model shares a link: a PS job sends one way at a time (push, then
    pull), so jobs on a full-duplex uplink meet only while they send the same way at once,
    not on an equal split of their flows all the time (``share="flows"``, which ``sluice
    whatif`` uses for its speed on large traces)."""
    from job_scheduler.core.preemption import load_costs
    from job_scheduler.simulation.simulator import Simulator
    from ps_runtime.calibration import launch_and_close

    # every job's first start holds its GPUs for the runtime's launch and close as measured
    # on the demo's runs, and for the exchange model's start-up rounds at the wait it meets
    launch_s, close_s = launch_and_close(config.compute)
    return Simulator(topology, jobs, config.make_policy(), slot=config.slot, bandwidth=bandwidth,
                     estimator=run_estimator(topology, config.compute, config.profile),
                     mechanisms=config.mechanisms.build(), priority=priority,
                     costs=load_costs(config.mechanisms.costs), on_plan=on_plan,
                     startup=True, startup_alone_s=launch_s + close_s, share=share)


def dry_run(jobs, topology, config: RunConfig) -> int:
    """``sluice run --dry-run``: the run's decisions, each slot's plan printed: the run's
    own loop on a virtual clock with the exchange model timing the jobs
    (``end_to_end.model_run``)."""
    from end_to_end.model_run import model_run

    priced = (f" (placements priced with the {config.price_priority} rule)"
              if config.price_priority else "")
    print(f"sluice run --dry-run: {len(jobs)} jobs on {topology.name}, policy {config.policy}"
          f"{priced}, slot {config.slot:g} s (job durations: the exchange model's predictions)")
    names = [j.name for j in sorted(jobs, key=lambda j: (j.arrival, j.name))]
    model_run(jobs, topology, config, run_estimator(topology, config.compute, config.profile),
              lambda t, plan: print("\n".join(
        f"{t:9.1f} s  {line}" for line in plan.lines(names))))
    return 0
