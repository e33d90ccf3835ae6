"""Fit the exchange model's queue terms on the calibration's own probe mixes (issue 47).

The calibration's queue stage (issue 47 item 6): the exchange model's loss and timeout
term of a shallow FIFO (``loss_timeouts``), its per-flow fair-share term of the fair
queue (``fair_round_bytes``) and what strict priority costs the classes below
(``priority_cost``), each fitted on the calibration's own probe mix, never on an
experiment's.

The queue mixes (:func:`queue_mix`): ``BULK_JOBS`` cross-rack bulk jobs arriving at once
and ``PROBES`` small jobs arriving among them, ``PROBE_GAP_S`` apart (the run-loop stage's
bulk and probe jobs, ``calibrate_exchange``), run through the experiments' run loop with
priority off on the short FIFO (``off-shallow`` at the fabric's measured idle RTT) and on
the fair queue (``off-fair``); the figure is the probes' mean JCT. The priority mix
(:func:`priority_mix`): two bulk jobs and, arriving among them one by one, newcomers of
the heavy-tail's medium size that compute between batches, run on the deep FIFO with the
controller's default rule on: the newcomers take the upper classes part of the time and
the bulk jobs get what they leave; the figure is every job's mean JCT. Each constant is
bisected until the model's figure (``fluid.simulate_batches``, as the experiments'
predictions compute it) matches the measured one; the other constants are the ones
fitted before it in the same run. Run from ``calibrate_exchange`` (one fabric, one warm
pool); ``--from`` refits stored measurements (a stage they lack keeps its constant).

A stage alone, on top of the shipped constants (the others stay as their calibration
fitted them; the stage's date, commit and figures join their provenance)::

    sudo .venv/bin/python -m bench.fabric.calibrate_queues --stage priority [--write] [--json [OUT]]

About 2 minutes a stage; needs root (the fabric) and takes the fabric lock.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from bench import harness

from bench.fabric.calibrate_exchange import (BULK, BULK_JOBS, PROBE, PROBE_GAP_S, PROBES,
                                             bisect_constant, loadavg, run_mix)



@dataclass(frozen=True)
class Stage:
    """One fit: the baseline whose egress tree it installs, whether the controller's
    default rule ranks the jobs (priority on), the constant, the range it is bisected
    over (the model's figure is monotone in it) and its value without the term."""
    queue: str
    priority: bool
    constant: str
    lo: float
    hi: float
    neutral: float


STAGES = {"off-shallow": Stage("off-shallow", False, "loss_timeouts", 0.0, 50.0, 0.0),
          "off-fair": Stage("off-fair", False, "fair_round_bytes", 0.0, 2_000_000.0, 0.0),
          "priority": Stage("off", True, "priority_cost", 0.5, 3.0, 1.0)}
BULK_AT_S = 1.0
# the priority mix: two bulk jobs of BULK's batches times PRIORITY_BULK_BATCHES / BULK[1]
# ... at once, then NEWCOMERS (bytes per batch, batches, compute per batch) every
# NEWCOMER_GAP_S; the compute gaps leave the bulk jobs part of the link, so the figure
# moves with priority_cost over its whole range
PRIORITY_BULK, PRIORITY_BULK_BATCHES = 2, 40
NEWCOMER, NEWCOMERS, NEWCOMER_GAP_S = (600_000, 4, 0.3), 6, 3.0


def queue_mix(queue: str) -> list:
    """A queue stage's jobs (``MixJob``, no compute) for ``queue``: the bulk jobs at once
    and the probes arriving among them."""
    from mininet_tests.heavy_tail.mix import MixJob

    bulk = [MixJob(f"cal-{queue}-bulk-{k}", BULK_AT_S, BULK[1], BULK[0], 1.0, 0.0)
            for k in range(BULK_JOBS)]
    probes = [MixJob(f"cal-{queue}-probe-{k}", BULK_AT_S + (k + 1) * PROBE_GAP_S, PROBE[1],
                     PROBE[0], 1.0, 0.0) for k in range(PROBES)]
    return bulk + probes


def priority_mix() -> list:
    """The priority stage's jobs: the bulk jobs at once, the computing newcomers arriving
    among them (each smaller than a bulk job, so the rule ranks it above them)."""
    from mininet_tests.heavy_tail.mix import MixJob

    nbytes, batches, compute = NEWCOMER
    bulk = [MixJob(f"cal-priority-bulk-{k}", BULK_AT_S, PRIORITY_BULK_BATCHES, BULK[0], 1.0, 0.0)
            for k in range(PRIORITY_BULK)]
    new = [MixJob(f"cal-priority-probe-{k}", BULK_AT_S + (k + 1) * NEWCOMER_GAP_S, batches,
                  nbytes, 0.5, compute) for k in range(NEWCOMERS)]
    return bulk + new


def stage_mix(name: str) -> list:
    return priority_mix() if STAGES[name].priority else queue_mix(name)


def measure_queues(topology, fabric, client, runner, out: Path, rtt_s: float,
                   port_base: int, stages: tuple[str, ...] = tuple(STAGES)) -> dict:
    """Run each of ``stages`` on its queue (the deep FIFO put back after, also on
    failure); per stage the jobs' figures, the hosts' TCP counters and the load."""
    from mininet_fabric import baselines as bl

    got = {}
    try:
        for k, name in enumerate(stages):
            stage = STAGES[name]
            fabric.install_priority_tree(partial(bl.egress_tree, stage.queue, rtt_s=rtt_s))
            ran = run_mix(topology, fabric, client, runner, out / f"queue-{name}",
                          stage_mix(name), stage.priority, port_base + 2000 * k)
            ran["load"] = loadavg()
            got[name] = ran
            print(f"calibrate: {name}: figure {measured_figure(name, ran['jobs']):.3f} s, TCP "
                  f"{ran['tcp']} (load {ran['load']})", file=sys.stderr, flush=True)
    finally:
        fabric.install_priority_tree()          # the deep FIFO, as every later run expects
    return {"rtt_s": round(rtt_s, 6), "runs": got}


def measured_figure(name: str, jobs: dict[str, dict]) -> float:
    """A stage's measured figure: the probes' mean JCT, or every job's (priority)."""
    return statistics.mean(v["jct_s"] for n, v in jobs.items()
                           if STAGES[name].priority or "-probe-" in n)


def model_probe_jct(c, queue: str, capacity: float, rtt_s: float) -> float:
    """The model's figure for the stage ``queue`` (a ``STAGES`` key): the probes' mean JCT
    (the check's figure for arriving jobs, ``check_exchange.model_figure``), or for the
    priority stage every job's under the controller's default rule."""
    from bench.fabric.check_exchange import model_figure
    from mininet_fabric import baselines as bl
    from mininet_tests import fluid
    from mininet_tests.heavy_tail.predict import (KEYS, PIPELINE_KEYS, SLOT_S, buffer_bytes,
                                                  cross_path)
    from sluice_common.rank_rules import DEFAULT_RULE

    stage = STAGES[queue]
    buffer = buffer_bytes(stage.queue, capacity, rtt_s)
    if not stage.priority:
        return model_figure("probes", queue_mix(queue), capacity, buffer, c,
                            bl.urgent_bytes(stage.queue))
    jobs = [fluid.BatchJob(j.name, j.arrival, j.batches, j.bytes_per_batch, j.compute_s, KEYS,
                           PIPELINE_KEYS, cross_path(capacity)) for j in priority_mix()]
    jct = fluid.simulate_batches(jobs, DEFAULT_RULE, capacity, buffer, c,
                                 overhead_s=SLOT_S / 2, urgent_bytes=bl.urgent_bytes(stage.queue))
    return statistics.mean(jct.values())


def fit_queues(c, measured: dict, capacity: float) -> tuple[object, dict]:
    """``c`` with each measured stage's constant fitted to ``measured``
    (:func:`measure_queues`'), and per stage the measured and model figures; a stage the
    measurements lack keeps its constant."""
    rtt_s = measured["rtt_s"]
    report = {}
    for queue, stage in STAGES.items():
        run = measured["runs"].get(queue)
        if run is None:
            continue
        name = stage.constant
        target = measured_figure(queue, run["jobs"])
        before = model_probe_jct(replace(c, **{name: stage.neutral}), queue, capacity, rtt_s)
        value, clamped = bisect_constant(
            lambda x, q=queue, n=name: model_probe_jct(replace(c, **{n: x}), q, capacity, rtt_s),
            target, stage.lo, stage.hi)
        c = replace(c, **{name: round(value, 4)})
        report[queue] = {"constant": name, "value": round(value, 4), "clamped": clamped,
                         "probes_measured_s": round(target, 4),
                         "model_without_term_s": round(before, 4),
                         "model_with_term_s": round(model_probe_jct(c, queue, capacity, rtt_s), 4),
                         "tcp": run["tcp"], "load": run["load"]}
    return c, report


def print_fit(report: dict) -> None:
    for queue, r in report.items():
        note = " (clamped: the term cannot reach the figure)" if r["clamped"] else ""
        figure = "every job's" if STAGES[queue].priority else "probes'"
        print(f"{queue}: {figure} mean JCT measured {r['probes_measured_s']:.3f} s, model "
              f"without the term {r['model_without_term_s']:.3f} s -> {r['constant']} "
              f"{r['value']:g}{note}, model {r['model_with_term_s']:.3f} s; TCP {r['tcp']}; "
              f"load {r['load']}", flush=True)


def measure_stages(stages: tuple[str, ...]) -> dict:
    """``stages`` alone on the fabric, through the experiments' run loop and warm pool."""
    from end_to_end.run import environment, warm_processes
    from mininet_tests.heavy_tail.fabric_setup import (PS_HOSTS, WORKER_HOSTS, experiment_topology,
                                                       machine_cc, measure_rtt, topology_arg)
    from sluice_common.rank_rules import DEFAULT_RULE
    from bench.fabric.calibrate_exchange import UPLINK_MBPS

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = loadavg()
    topology, _ = experiment_topology(UPLINK_MBPS)
    out = Path(tempfile.mkdtemp(prefix="sluice-calib-queues-"))
    try:
        with environment(topology, topology_arg(topology, out), out, rank=DEFAULT_RULE,
                         tcp_congestion=machine_cc()) as (fabric, client), \
                warm_processes(topology, fabric, "emulated", refill=False, timeout_s=900,
                               per_host=max(len(stage_mix(n)) for n in stages) + 1) as runner:
            rtt_s = measure_rtt(fabric, WORKER_HOSTS[0], PS_HOSTS[0])
            queues = measure_queues(topology, fabric, client, runner, out, rtt_s, 26000, stages)
    finally:
        subprocess.run(["rm", "-rf", str(out)], check=False)
    return {**queues, "started": started, "load_before": load_before, "load_after": loadavg()}


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--stage", action="append", choices=sorted(STAGES), required=True,
                    help="the stage to run and fit (repeatable)")
    ap.add_argument("--write", action="store_true",
                    help="write the fitted constants to sluice_common/data/exchange_constants.yaml")
    ap.add_argument("--from", dest="from_json", default=None, metavar="JSON",
                    help="fit the measurements of an earlier run's --json output (no fabric)")
    args = ap.parse_args()
    import json

    from bench.fabric.calibration_report import source_commit
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology, machine_cc
    from sluice_common.exchange import DATA_FILE, default_constants, save_constants
    from bench.fabric.calibrate_exchange import UPLINK_MBPS

    stages = tuple(dict.fromkeys(args.stage))
    m = (json.loads(Path(args.from_json).read_text())["measured"] if args.from_json
         else measure_stages(stages))
    if "queues" in m:           # a whole calibration's output (calibrate_exchange --json)
        m = {**m["queues"], **{k: m[k] for k in ("started", "load_before", "load_after")}}
    m = {**m, "runs": {k: v for k, v in m["runs"].items() if k in stages}}
    _, capacity = experiment_topology(UPLINK_MBPS)
    c, report = fit_queues(default_constants(), m, capacity)
    print_fit(report)
    provenance = dict(c.provenance)
    for name, r in report.items():
        provenance[f"{name}_stage"] = {
            "command": f"python -m bench.fabric.calibrate_queues --stage {name} --write",
            "date": m["started"], "commit": source_commit(), "host_tcp": machine_cc(),
            "rtt_s": m["rtt_s"], "load_average_before": m["load_before"],
            "load_average_after": m["load_after"], "refit_from": args.from_json,
            **{k: r[k] for k in ("constant", "value", "clamped", "probes_measured_s",
                                 "model_without_term_s", "model_with_term_s", "tcp", "load")}}
    c = replace(c, provenance=provenance)
    if args.write:
        path = save_constants(c, DATA_FILE, comment=(
            "Constants of sluice_common.exchange (issue 27 item 1), fitted on the fabric by\n"
            "`python -m bench.fabric.calibrate_exchange --write` (and its stages by\n"
            "`python -m bench.fabric.calibrate_queues --stage NAME --write`); see provenance."))
        print(f"wrote {path}", flush=True)
    harness.write_json(args.json, {"measured": m, "report": report,
                                   "constants": {r["constant"]: r["value"]
                                                 for r in report.values()}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
