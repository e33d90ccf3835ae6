"""The calibration's queue stage (issue 47 item 6): the exchange model's loss and timeout
term of a shallow FIFO (``loss_timeouts``) and its per-flow fair-share term of the fair
queue (``fair_round_bytes``), each fitted on the calibration's own probe mix, never on an
experiment's.

The mix (:func:`queue_mix`): ``BULK_JOBS`` cross-rack bulk jobs arriving at once and
``PROBES`` small jobs arriving among them, ``PROBE_GAP_S`` apart (the run-loop stage's
bulk and probe jobs, ``calibrate_exchange``), run through the experiments' run loop with
priority off on the short FIFO (``off-shallow`` at the fabric's measured idle RTT) and on
the fair queue (``off-fair``). Each constant is bisected until the model's mean JCT of the
probes (``fluid.simulate_batches``, as the experiments' predictions compute it) matches
the measured one; the other constants are the ones fitted before it in the same run.
Run from ``calibrate_exchange`` (one fabric, one warm pool); ``--from`` refits stored
measurements.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

from bench.fabric.calibrate_exchange import (BULK, BULK_JOBS, PROBE, PROBE_GAP_S, PROBES,
                                             bisect_constant, loadavg, run_mix)

# each queue's constant, and the range it is bisected over (model monotone in it)
FITS = {"off-shallow": ("loss_timeouts", 0.0, 50.0),
        "off-fair": ("fair_round_bytes", 0.0, 2_000_000.0)}
BULK_AT_S = 1.0


def queue_mix(queue: str) -> list:
    """The stage's jobs (``MixJob``, no compute) for ``queue``: the bulk jobs at once and
    the probes arriving among them."""
    from mininet_tests.heavy_tail.mix import MixJob

    bulk = [MixJob(f"cal-{queue}-bulk-{k}", BULK_AT_S, BULK[1], BULK[0], 1.0, 0.0)
            for k in range(BULK_JOBS)]
    probes = [MixJob(f"cal-{queue}-probe-{k}", BULK_AT_S + (k + 1) * PROBE_GAP_S, PROBE[1],
                     PROBE[0], 1.0, 0.0) for k in range(PROBES)]
    return bulk + probes


def measure_queues(topology, fabric, client, runner, out: Path, rtt_s: float,
                   port_base: int) -> dict:
    """Run :func:`queue_mix` on each queue of ``FITS`` (the deep FIFO put back after, also
    on failure); per queue the jobs' figures, the hosts' TCP counters and the load."""
    from mininet_fabric import baselines as bl

    got = {}
    try:
        for k, queue in enumerate(FITS):
            fabric.install_priority_tree(partial(bl.egress_tree, queue, rtt_s=rtt_s))
            ran = run_mix(topology, fabric, client, runner, out / f"queue-{queue}",
                          queue_mix(queue), False, port_base + 2000 * k)
            ran["load"] = loadavg()
            got[queue] = ran
            probes = [v["jct_s"] for n, v in ran["jobs"].items() if "-probe-" in n]
            print(f"calibrate: {queue}: probes' JCT {[round(x, 3) for x in probes]} s, TCP "
                  f"{ran['tcp']} (load {ran['load']})", file=sys.stderr, flush=True)
    finally:
        fabric.install_priority_tree()          # the deep FIFO, as every later run expects
    return {"rtt_s": round(rtt_s, 6), "runs": got}


def model_probe_jct(c, queue: str, capacity: float, rtt_s: float) -> float:
    """The model's mean JCT of the probes of :func:`queue_mix` on ``queue`` (the check's
    figure for arriving jobs, ``check_exchange.model_figure``)."""
    from bench.fabric.check_exchange import model_figure
    from mininet_fabric import baselines as bl
    from mininet_tests.heavy_tail.predict import buffer_bytes

    return model_figure("probes", queue_mix(queue), capacity, buffer_bytes(queue, capacity, rtt_s),
                        c, bl.urgent_bytes(queue))


def fit_queues(c, measured: dict, capacity: float) -> tuple[object, dict]:
    """``c`` with ``loss_timeouts`` and ``fair_round_bytes`` fitted to ``measured``
    (:func:`measure_queues`'), and per queue the measured and model figures."""
    rtt_s = measured["rtt_s"]
    report = {}
    for queue, (name, lo, hi) in FITS.items():
        run = measured["runs"][queue]
        target = statistics.mean(v["jct_s"] for n, v in run["jobs"].items() if "-probe-" in n)
        before = model_probe_jct(c, queue, capacity, rtt_s)
        value, clamped = bisect_constant(
            lambda x, q=queue, n=name: model_probe_jct(replace(c, **{n: x}), q, capacity, rtt_s),
            target, lo, hi)
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
        print(f"{queue}: probes' mean JCT measured {r['probes_measured_s']:.3f} s, model "
              f"without the term {r['model_without_term_s']:.3f} s -> {r['constant']} "
              f"{r['value']:g}{note}, model {r['model_with_term_s']:.3f} s; TCP {r['tcp']}; "
              f"load {r['load']}", flush=True)
