"""Fit the exchange model's queue terms on the calibration's own probe mixes.

The calibration's queue stage: the exchange model's loss and timeout
term of a shallow FIFO (``loss_timeouts``), the senders' backlog a FIFO shorter than it
moves to the senders (``backlog_bytes``), its per-flow fair-share term of the fair queue
(``fair_round_bytes``) and what strict priority costs the classes below
(``priority_cost``), each fitted on the calibration's own probe mix, never on an
experiment's.

The queue mixes (:func:`queue_mix`): ``BULK_JOBS`` cross-rack bulk jobs arriving at once
and ``PROBES`` small jobs arriving among them, ``PROBE_GAP_S`` apart (the run-loop stage's
bulk and probe jobs, :mod:`mininet_tests.calibration.exchange`), run through the experiments' run loop with
priority off on the short FIFO (``off-shallow`` at the fabric's measured idle RTT), on a
FIFO of ``MID_DEPTH_PACKETS`` (the ``backlog`` stage) and on the fair queue
(``off-fair``); the figure is the probes' mean JCT. The priority mix
(:func:`priority_mix`): two bulk jobs and, arriving among them one by one, newcomers of
the heavy-tail's medium size that compute between batches, run on the deep FIFO with the
controller's default rule on: the newcomers take the upper classes part of the time and
the bulk jobs get what they leave; the figure is every job's mean JCT. Each constant is
bisected until the model's figure (``fluid.simulate_batches``, as the experiments'
predictions compute it) matches the measured one, the stages in turn until none moves
(the short FIFO's figure has a backlog term too). Run from the exchange calibration (one
fabric, one warm pool); ``--from`` takes a stage's measurements from a stored run (a
stage no stored run has is measured; a stage not named keeps its constant).

A stage alone, on top of the shipped constants (the others stay as their calibration
fitted them; the stage's date, commit and figures join their provenance)::

    sudo .venv/bin/sluice calibrate queues --stage priority [--write] [--json [OUT]]

The backlog stage measured, refitted with the short FIFO's stored measurements (the two
constants meet in both figures)::

    sudo .venv/bin/sluice calibrate queues --stage backlog --stage off-shallow \
        --from bench/results/exchange-calibration-2026-11-28.json --write --json OUT

About 2 minutes a stage; needs root (the fabric) and takes the fabric lock.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from mininet_fabric import priority as fabric_priority
from mininet_fabric.baselines import MTU_BYTES
from mininet_tests.calibration.runs import (BULK, BULK_JOBS, PROBE, PROBE_GAP_S, PROBES,
                                            UPLINK_MBPS, bisect_constant, loadavg,
                                            model_figure, read_measured, run_mix)
from sluice_common.errors import InputError

DEEP_BYTES = fabric_priority.LEAF_QUEUE_PACKETS * MTU_BYTES


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


# the backlog stage's FIFO: between the short FIFO of the loss stage (11 packets) and the
# deep one (200), short enough that the senders' backlog overflows it, deep enough that
# few of its drops need a timeout
MID_DEPTH_PACKETS = 50
MID_QUEUE = f"fifo-{MID_DEPTH_PACKETS}"
STAGES = {"off-shallow": Stage("off-shallow", False, "loss_timeouts", 0.0, 50.0, 0.0),
          "backlog": Stage(MID_QUEUE, False, "backlog_bytes", 0.0, DEEP_BYTES, 0.0),
          "off-fair": Stage("off-fair", False, "fair_round_bytes", 0.0, 2_000_000.0, 0.0),
          "priority": Stage("off", True, "priority_cost", 0.5, 3.0, 1.0)}
# the stages' constants interact (the short FIFO's figure has the backlog term, the
# mid-depth one a loss term): fitted in turn until none moves by more than this share
JOINT_TOLERANCE, JOINT_ROUNDS = 1e-3, 30
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


@contextlib.contextmanager
def stage_queue(name: str):
    """The baseline a stage runs on; the backlog stage's FIFO (a swept depth, not one of
    the experiments' baselines) is registered only while it is used."""
    from mininet_tests.calibration.fifo_depth import depths_registered

    queue = STAGES[name].queue
    with depths_registered([MID_DEPTH_PACKETS] if queue == MID_QUEUE else []):
        yield queue


def measure_queues(topology, fabric, client, runner, out: Path, rtt_s: float,
                   port_base: int, stages: tuple[str, ...] = tuple(STAGES)) -> dict:
    """Run each of ``stages`` on its queue (the deep FIFO put back after, also on
    failure); per stage the jobs' figures, the hosts' TCP counters and the load."""
    from mininet_fabric import baselines as bl

    got = {}
    try:
        for k, name in enumerate(stages):
            with stage_queue(name) as queue:
                fabric.install_priority_tree(partial(bl.egress_tree, queue, rtt_s=rtt_s))
                ran = run_mix(topology, fabric, client, runner, out / f"queue-{name}",
                              stage_mix(name), STAGES[name].priority, port_base + 2000 * k)
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
    (the figure for arriving jobs, :func:`~mininet_tests.calibration.runs.model_figure`), or
    for the priority stage every job's under the controller's default rule."""
    from mininet_fabric import baselines as bl
    from mininet_tests import fluid
    from mininet_tests.heavy_tail.predict import (KEYS, PIPELINE_KEYS, SLOT_S, buffer_bytes,
                                                  cross_path)
    from sluice_common.rank_rules import DEFAULT_RULE

    stage = STAGES[queue]
    with stage_queue(queue) as name:
        buffer, urgent = buffer_bytes(name, capacity, rtt_s), bl.urgent_bytes(name)
    if not stage.priority:
        return model_figure("probes", queue_mix(queue), capacity, buffer, c, urgent)
    jobs = [fluid.BatchJob(j.name, j.arrival, j.batches, j.bytes_per_batch, j.compute_s, KEYS,
                           PIPELINE_KEYS, cross_path(capacity)) for j in priority_mix()]
    jct = fluid.simulate_batches(jobs, DEFAULT_RULE, capacity, buffer, c,
                                 overhead_s=SLOT_S / 2, urgent_bytes=urgent)
    return statistics.mean(jct.values())


def fit_queues(c, measured: dict, capacity: float) -> tuple[object, dict]:
    """``c`` with each measured stage's constant fitted to ``measured``
    (:func:`measure_queues`'), and per stage the measured and model figures; a stage the
    measurements lack keeps its constant. The stages are fitted in turn, each with the
    others' latest values, until no constant moves by more than ``JOINT_TOLERANCE``
    (the short and the mid-depth FIFO each see both of their terms)."""
    runs = {q: r for q, r in measured["runs"].items() if q in STAGES}
    rtt = {q: r.get("rtt_s", measured.get("rtt_s")) for q, r in runs.items()}
    fitted = {}
    for _ in range(JOINT_ROUNDS):
        moved = 0.0
        for queue, run in runs.items():
            name = STAGES[queue].constant
            value, clamped = _fit_stage(c, queue, run, capacity, rtt[queue])
            old = getattr(c, name)
            moved = max(moved, abs(value - old) / max(abs(old), abs(value), 1e-9))
            c = replace(c, **{name: value})
            fitted[queue] = clamped
        if moved <= JOINT_TOLERANCE:
            break
    report = {}
    for queue, run in runs.items():
        stage = STAGES[queue]
        report[queue] = {
            "constant": stage.constant, "value": getattr(c, stage.constant),
            "clamped": fitted[queue],
            "probes_measured_s": round(measured_figure(queue, run["jobs"]), 4),
            "model_without_term_s": round(model_probe_jct(
                replace(c, **{stage.constant: stage.neutral}), queue, capacity, rtt[queue]), 4),
            "model_with_term_s": round(model_probe_jct(c, queue, capacity, rtt[queue]), 4),
            "tcp": run["tcp"], "load": run["load"]}
    return c, report


def _fit_stage(c, queue: str, run: dict, capacity: float, rtt_s: float) -> tuple[float, bool]:
    """One stage's constant bisected until the model's figure meets the measured one."""
    stage = STAGES[queue]
    value, clamped = bisect_constant(
        lambda x: model_probe_jct(replace(c, **{stage.constant: x}), queue, capacity, rtt_s),
        measured_figure(queue, run["jobs"]), stage.lo, stage.hi)
    return round(value, 4), clamped


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


def gather(stages: tuple[str, ...], stored: list[str]) -> dict:
    """The measurements of ``stages``: each from the first of the ``stored`` runs' --json
    outputs (this module's or the exchange calibration's) that has it, the others measured
    on the fabric now. Every run carries its RTT, its date and where it came from."""
    runs = {}
    for path in stored:
        m = read_measured(path)
        if "queues" in m:           # a whole calibration's output (calibrate exchange --json)
            m = {**m["queues"], **{k: m[k] for k in ("started", "load_before", "load_after")}}
        if not isinstance(m.get("runs"), dict):
            raise InputError(path, "missing: the queue stages' runs", field="measured.runs")
        for name, run in m["runs"].items():
            if name in stages and name not in runs:
                runs[name] = {**_tagged(m, run), "refit_from": path}
    live = tuple(n for n in stages if n not in runs)
    if live:
        m = measure_stages(live)
        runs.update({n: {**_tagged(m, m["runs"][n]), "refit_from": None} for n in live})
    return {"runs": {n: runs[n] for n in stages}}


def _tagged(m: dict, run: dict) -> dict:
    """A stage's run with its RTT, date and load, from the run or else from its whole run."""
    keys = ("rtt_s", "started", "load_before", "load_after")
    return {**run, **{k: run.get(k, m.get(k)) for k in keys}}


def calibrate(stages: tuple[str, ...], stored: list[str], write: bool,
              json_out: str | None) -> int:
    """Fit ``stages`` together (measured, or taken from the ``stored`` runs), report; with
    ``write`` enter them, with their provenance, in the shipped constants."""
    from mininet_tests.calibration.report import source_commit, write_json
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology, machine_cc
    from sluice_common.exchange import DATA_FILE, default_constants, save_constants

    m = gather(tuple(dict.fromkeys(stages)), stored)
    _, capacity = experiment_topology(UPLINK_MBPS)
    c, report = fit_queues(default_constants(), m, capacity)
    print_fit(report)
    provenance = dict(c.provenance)
    for name, r in report.items():
        run = m["runs"][name]
        provenance[f"{name}_stage"] = {
            "command": "sluice calibrate queues "
                       + " ".join(f"--stage {n}" for n in report) + " --write",
            "date": run["started"], "commit": source_commit(), "host_tcp": machine_cc(),
            "rtt_s": run["rtt_s"], "load_average_before": run["load_before"],
            "load_average_after": run["load_after"], "refit_from": run["refit_from"],
            **{k: r[k] for k in ("constant", "value", "clamped", "probes_measured_s",
                                 "model_without_term_s", "model_with_term_s", "tcp", "load")}}
    c = replace(c, provenance=provenance)
    if write:
        path = save_constants(c, DATA_FILE, comment=(
            "Constants of sluice_common.exchange, fitted on the fabric by\n"
            "`sluice calibrate exchange --write` (and its stages by\n"
            "`sluice calibrate queues --stage NAME --write`); see provenance."))
        print(f"wrote {path}", flush=True)
    write_json(json_out, {"measured": m, "report": report,
                          "constants": {r["constant"]: r["value"] for r in report.values()}})
    return 0
