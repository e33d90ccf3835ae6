"""``sluice simulate``: the policies compared on one workload in the simulator.

What the command is asked is one frozen :class:`SimulateConfig`, built once from the
command line (``job_scheduler.simulation.cli``) and handed down; nothing here reads an argparse
namespace. Its checks raise ``ValueError("field: message")`` (or an option
:class:`~sluice_common.errors.InputError` naming the field); only the CLI turns a field
into its flag. Every value and input file is checked before the first simulation runs:
bad input raises an ``InputError`` (exit 2) and nothing is written.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from job_scheduler.core.mechanisms import MechanismOptions
from job_scheduler.core.policies import (DEFAULT_EPS, DEFAULT_K, DEFAULT_V, PRICES_PRIORITY,
                                         REGISTRY, check_price_priority, make_policy,
                                         parse_policy_names, requested_gpus)
from job_scheduler.core.proteus import K_READINGS
from sluice_common import rank_rules
from sluice_common.errors import InputError

# show a progress bar on stderr from this many jobs on (short runs stay quiet)
PROGRESS_FROM_JOBS = 2000


# how ``sluice simulate`` prices the exchange (job_scheduler.core.exchange_pricing): not
# beyond eq. 5, on the cluster as described, or on its emulated fabric (sluice run's)
EXCHANGE_WORLDS = ("off", "cluster", "emulated")


@dataclass(frozen=True)
class SimulateConfig:
    """What ``sluice simulate`` is asked, as one frozen value."""
    workload: str                        # scenario name, job YAML or trace CSV
    policies: tuple[str, ...] = ("lyapunov", "single", "random", "fifo", "tetris", "las")
    topology: str = "two-rack"           # built-in name or YAML path
    trace_format: str | None = None      # tiresias | philly | sacct
    trace_assumptions: str | None = None  # sacct: assumptions YAML (trace_assumptions.py)
    jobs: int | None = None              # keep the first N jobs
    seed: int = 0
    scenario_caps: str = "paper"
    trace_caps: str = "requested"
    estimate_error: float = 0.0          # sigma of the log-normal error sluice sees
    slot: float = 10.0                   # seconds
    V: float = DEFAULT_V
    eps: float = DEFAULT_EPS
    k: str = DEFAULT_K
    lam: float = 0.5                     # Liquid placement: rack cost vs fitness
    ga: bool = True
    placement: str | None = None         # one placement for every policy
    network: bool = True                 # False: ideal fabric, no communication time
    priority: str | None = None          # the fabric's job rule on the uplinks (None: off)
    price_priority: str | None = None    # sluice prices placements under this rule (None: off)
    exchange: str = "off"                # off | cluster | emulated: the exchange model's pricing
    profile: str | None = None           # device profile for Cost_bat
    json: bool = False                   # one JSON object on stdout instead of a table
    plot: str | None = None              # directory for PNG plots
    preemption_cost: str | None = None   # measured | zero: charge every preemption
    mechanisms: MechanismOptions = MechanismOptions()

    def __post_init__(self):
        parse_policy_names(",".join(self.policies))      # unknown or empty names
        checks = [
            ("slot", self.slot > 0, f"must be > 0 seconds, got {self.slot}"),
            ("V", self.V >= 0, f"must be >= 0, got {self.V}"),
            ("eps", self.eps >= 0, f"must be >= 0, got {self.eps}"),
            ("estimate_error", self.estimate_error >= 0,
             f"must be >= 0, got {self.estimate_error}"),
            ("lam", 0.0 <= self.lam <= 1.0, f"must be in [0, 1], got {self.lam}"),
            ("k", self.k in K_READINGS, f"must be one of {', '.join(K_READINGS)}, got {self.k!r}"),
            ("priority", self.priority is None or self.priority in rank_rules.names(),
             f"must be one of {', '.join(rank_rules.names())} or None, got {self.priority!r}"),
            ("migrate", not self.mechanisms.migrate or self.preemption_cost is not None,
             "needs a preemption cost (measured or zero)"),
            ("exchange", self.exchange in EXCHANGE_WORLDS,
             f"must be one of {', '.join(EXCHANGE_WORLDS)}, got {self.exchange!r}"),
            ("exchange", self.exchange == "off" or self.network,
             "prices the network; the ideal fabric (no network) has none")]
        for name, ok, message in checks:
            if not ok:
                raise ValueError(f"{name}: {message}")
        check_price_priority(self.price_priority)
        if self.price_priority and not set(self.policies) & set(PRICES_PRIORITY):
            raise ValueError(f"price_priority: prices the placements of "
                             f"{', '.join(PRICES_PRIORITY)}, which the policies leave out")
        if self.preemption_cost is not None:
            MechanismOptions(costs=self.preemption_cost)       # measured | zero
        for name in self.policies:
            self.mechanisms.check(name)
        if self.plot:
            plot_dir = Path(self.plot)
            if plot_dir.exists() and not plot_dir.is_dir():
                raise InputError(self.plot, "exists and is not a directory", field="plot")
            existing = plot_dir
            while not existing.exists():            # created only after the runs succeed
                existing = existing.parent
            if not existing.is_dir() or not os.access(existing, os.W_OK):
                raise InputError(self.plot, f"cannot create plots under '{existing}'",
                                 field="plot")

    @property
    def cost_mode(self) -> str | None:
        """What a suspension costs: time-slicing and packing charge every switch, the
        measured table unless ``preemption_cost`` says otherwise."""
        return self.preemption_cost or ("measured" if self.mechanisms.shares else None)


def simulate(config: SimulateConfig) -> int:
    """Run every policy of ``config`` on its workload; print the table (or JSON)."""
    from job_scheduler.core.estimator import Estimator
    from job_scheduler.core.exchange_pricing import ExchangePricing
    from job_scheduler.core.mechanisms import summary
    from job_scheduler.core.preemption import load_costs
    from job_scheduler.simulation.simulator import Simulator, stderr_progress
    from job_scheduler.simulation.workloads import load_workload_report
    from topologies import load_topology

    names = list(config.policies)
    topo = load_topology(config.topology)
    jobs, trace = load_workload_report(
        config.workload, trace_format=config.trace_format, jobs=config.jobs,
        seed=config.seed, caps=config.scenario_caps, trace_caps=config.trace_caps,
        trace_assumptions=config.trace_assumptions)
    if not jobs:
        raise InputError(config.workload, "no jobs")
    fixed = [n for n in names if REGISTRY[n].fixed_count]
    for job in jobs:
        if fixed and requested_gpus(job) > topo.total_gpus:
            raise InputError(config.workload, f"asks for {requested_gpus(job)} GPUs; policy "
                             f"'{fixed[0]}' runs jobs at that count and topology "
                             f"'{topo.name}' has {topo.total_gpus}",
                             element=f"job '{job.name}'", field="max_gpus")

    pricing = (None if config.exchange == "off" else
               ExchangePricing.for_topology(topo, emulated=config.exchange == "emulated"))
    estimator = Estimator(config.profile, exchange=pricing)
    profile = profile_text(estimator)
    if not config.json:
        print(f"device profile: {profile}")
        print(f"network model: {network_model(config)}")
        for line in trace_lines(jobs, trace):
            print(line)
    results = {}
    extra: dict[str, dict] = {}
    cost_mode = config.cost_mode
    costs = load_costs(cost_mode)
    for name in names:
        policy = make_policy(name, seed=config.seed, V=config.V, eps=config.eps,
                             lam=config.lam, ga=config.ga, placement=config.placement,
                             k=config.k, estimate_error=config.estimate_error,
                             price_priority=(config.price_priority if name in PRICES_PRIORITY
                                             else None))
        progress = stderr_progress(name) if len(jobs) >= PROGRESS_FROM_JOBS else None
        sim = Simulator(topo, jobs, policy, slot=config.slot, progress=progress,
                        network=config.network, estimator=estimator, costs=costs,
                        mechanisms=config.mechanisms.build(), priority=config.priority)
        results[name] = sim.run()
        if cost_mode:
            extra[name] = summary(sim, results[name])

    if config.plot:
        from job_scheduler.simulation.sim_plots import write_plots
        for path in write_plots(results, config.plot,
                                title=f"{config.workload} on {topo.name}"):
            print(f"wrote {path}", file=sys.stderr)
    if config.json:
        print(json.dumps({"policies": {n: {**r.metrics(), **extra.get(n, {}),
                                           "job_results": r.job_records}
                                       for n, r in results.items()},
                          "workload": str(config.workload), "topology": topo.name,
                          "device_profile": profile, "network_model": network_model(config),
                          "seed": config.seed, **({"priority": config.priority}
                                                  if config.priority else {}),
                          **({"price_priority": config.price_priority}
                             if config.price_priority else {}),
                          **({"exchange": config.exchange} if config.exchange != "off"
                             else {}),
                          **trace_json(jobs, trace)}))
    else:
        _print_table(results, config, topo.name, len(jobs))
        for n, e in extra.items():
            print(f"{n}: {e['preemptions']} preemptions, {e['migrations']} migrations, "
                  f"{e['grows']} grows, {e['shrinks']} shrinks, {e['time_slices']} time slices, "
                  f"{e['packed']} packed, {e['preemption_cost_s']:.1f} s of suspend/resume "
                  f"charged ({cost_mode} cost)")
    return 0


def trace_lines(jobs, trace) -> list[str]:
    """What a report says of a trace beyond its jobs: what a sacct export left out and
    why, and the assumptions that gave the jobs what the trace does not record."""
    from job_scheduler.simulation.trace_assumptions import assumption_lines

    out = trace.report_lines() if trace is not None else []
    assumed = assumption_lines(jobs)
    if assumed:
        out.append("assumed (the trace records no model, batch size or PS count):")
        out += [f"  {line}" for line in assumed]
    return out


def trace_json(jobs, trace) -> dict:
    """:func:`trace_lines` as --json fields: ``trace`` (a sacct export: its form, GPU
    field, jobs kept, left out by reason, step lines skipped) and ``assumptions``
    (assumption -> job count)."""
    from job_scheduler.simulation.trace_assumptions import assumption_summary

    out: dict = {}
    if trace is not None:
        out["trace"] = {"source": trace.source, "format": f"sacct {trace.form}",
                        "gpu_field": trace.gpu_field, "kept": len(trace.jobs),
                        "left_out": trace.left_out_counts(), "steps_skipped": trace.steps}
    summary = assumption_summary(jobs)
    if summary:
        out["assumptions"] = summary
    return out


def profile_text(estimator) -> str:
    """The device profile an estimator prices Cost_bat with: its device and its file."""
    return f"{estimator.device} ({estimator.profile.path})"


def network_model(config: SimulateConfig) -> str:
    """What the simulator charges for communication under ``config``, in a line."""
    if not config.network:
        return ("none: an ideal fabric, no communication time (--no-network)")
    text = ("eq. 5: every batch pushes and pulls the parameters at its placement's "
            "bandwidth per worker, capped by its share of each rack uplink it crosses")
    text += (f" (strict priority by the {config.priority} rule)" if config.priority
             else " (a fair share)")
    text += "; a PS and a worker on one host exchange over its bus"
    if config.exchange != "off":
        where = ("the emulated fabric's rates" if config.exchange == "emulated"
                 else "the cluster as described")
        text += (f"; plus the exchange model on {where}: ps-lite's per-key messages and "
                 "round trips, each round's wait in the uplink queues")
    return text


# what the columns of the table mean, printed under it
TABLE_LEGEND = (
    "avg JCT / median / p95: job completion time, end - arrival, over all jobs; "
    "avg wait: arrival to first start;\n"
    "makespan: first arrival to last end; GPU util: GPU-seconds the jobs ran / (the "
    "topology's GPUs x makespan); jobs: jobs simulated")


def _print_table(results, config: SimulateConfig, topo_name: str, n_jobs: int) -> None:
    print(f"workload {config.workload} ({n_jobs} jobs) on {topo_name}, slot {config.slot:g} s, "
          f"seed {config.seed}" + (f", uplink priority {config.priority}" if config.priority
                                   else "")
          + (f", sluice prices placements under {config.price_priority}"
             if config.price_priority else "")
          + (f", exchange model ({config.exchange} fabric)" if config.exchange != "off"
             else ""))
    head = (f"{'policy':<10} {'avg JCT s':>11} {'median s':>10} {'p95 s':>10} {'avg wait s':>11} "
            f"{'makespan s':>11} {'GPU util':>9} {'jobs':>6}")
    print(head)
    print("-" * len(head))
    for name, r in results.items():
        print(f"{name:<10} {r.avg_jct:>11.1f} {r.median_jct:>10.1f} {r.p95_jct:>10.1f} "
              f"{r.avg_wait:>11.1f} {r.makespan:>11.1f} {r.gpu_util:>9.1%} {r.jobs:>6}")
    print(TABLE_LEGEND)
