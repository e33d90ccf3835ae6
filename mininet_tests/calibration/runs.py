"""The calibration's workload and how it runs on the fabric: the points and jobs
:mod:`mininet_tests.calibration.exchange` measures (also those of
:mod:`~mininet_tests.calibration.queues` and of the benchmarks that check the model on the
same fabric), one mix through the experiments' run loop, the model's figure for a mix and
the bisection every single-constant fit uses."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from sluice_common.errors import InputError, read_user_text

# (path name, server host, worker host)
PATHS = (("in-host", "h1", "h1"), ("in-rack", "h1", "h2"), ("cross-rack", "h1", "h3"))
# (bytes per batch, keys, window): small to medium batches, both window settings
POINTS = ((20_000, 1, 0), (160_000, 4, 0), (400_000, 8, 3))
UPLINK_MBPS = 12.0
BATCHES = 10
SKIP = 2                      # the first batches carry connection set-up
RUN_TIMEOUT_S = 300           # one run_jobs call, start to the last exit
SHARED = (300_000, 4, 0)      # the contention point: two such cross-rack jobs at once
# Start-up and many senders, through the run loop every experiment and `sluice run` use
# (controller process, one FIFO class): PROBES small jobs (PROBE: bytes, batches) arrive
# alone PROBE_GAP_S apart (their JCT beyond their batches fits startup_s); then BULK_JOBS
# cross-rack jobs (BULK) arrive at once (their median iteration fits
# queue_fill_per_sender) and PROBES more small jobs arrive among them (their JCT beyond
# startup_s and their batches, over the model's queue wait, fits startup_rounds)
PROBE, PROBES, PROBE_GAP_S = (20_000, 3), 3, 4.0
BULK, BULK_JOBS = (300_000, 12), 6


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def path_rates(fabric_topology, server: str, worker: str) -> tuple[float, ...]:
    """The link rates (bytes/s on the emulated fabric) from ``worker`` to ``server``."""
    if server == worker:
        return ()
    t = fabric_topology
    nodes = t.path(worker, server)
    scale = t.emulation_bw_scale
    rates = []
    for a, b in zip(nodes, nodes[1:]):
        rates.append(t.graph.edges[a, b]["bw"] * scale * 1e6 / 8)
    return tuple(rates)


def bisect_constant(model, measured: float, lo: float, hi: float) -> tuple[float, bool]:
    """The value in [lo, hi] at which the increasing ``model`` meets ``measured``, and
    whether it was clamped to an end (the term cannot explain the figure)."""
    if model(lo) >= measured:
        return lo, True
    if model(hi) <= measured:
        return hi, True
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if model(mid) < measured else (lo, mid)
    return (lo + hi) / 2, False


def driver_mix() -> list:
    """The run-loop points' jobs (``mininet_tests.heavy_tail.mix.MixJob``): PS on h1/h2,
    workers on h3/h4 (the experiment's fixed placement), no compute."""
    from mininet_tests.heavy_tail.mix import MixJob

    alone = [MixJob(f"cal-alone-{k}", k * PROBE_GAP_S, PROBE[1], PROBE[0], 1.0, 0.0)
             for k in range(PROBES)]
    t_bulk = PROBES * PROBE_GAP_S + 2.0
    bulk = [MixJob(f"cal-bulk-{k}", t_bulk, BULK[1], BULK[0], 1.0, 0.0) for k in range(BULK_JOBS)]
    among = [MixJob(f"cal-probe-{k}", t_bulk + (k + 1) * PROBE_GAP_S, PROBE[1], PROBE[0], 1.0, 0.0)
             for k in range(PROBES)]
    return alone + bulk + among


def run_mix(topology, fabric, client, runner, out: Path, mix: list, priority: bool,
            port_base: int, overrides: dict | None = None) -> dict:
    """Run ``mix`` (``mininet_tests.heavy_tail.mix.MixJob``: PS on h1/h2, workers on h3/h4, the
    experiments' fixed placement) through the experiments' run loop on a full, idle warm
    pool (``overrides``: job -> WorkerOverrides, default the experiments'); per job its
    JCT, its median iteration after SKIP batches and its start-up (arrival to its first
    batch, after ``kv.init``'s); and the hosts' TCP counters over the run (``tcp``:
    retransmitted segments, timeouts)."""
    from end_to_end.result import iterations_of
    from end_to_end.runloop import RealTimeRun
    from end_to_end.run_options import RunOptions
    from job_scheduler.core.estimator import Estimator, nominal_bandwidth
    from mininet_tests.heavy_tail.fabric_setup import (PS_HOSTS, WORKER_HOSTS, placement_step,
                                                       specs_and_overrides, tcp_counters)
    from mininet_tests.heavy_tail.measure import Sampler, startup_s
    from mininet_tests.heavy_tail.predict import SLOT_S

    runner.fill()
    runner.wait_ready(timeout=900)
    specs, default = specs_and_overrides(mix)
    options = RunOptions(priority=priority, slot_s=SLOT_S, port_base=port_base,
                         worker_overrides=overrides or default, job_timeout_s=RUN_TIMEOUT_S)
    hosts = list(PS_HOSTS + WORKER_HOSTS)
    before = tcp_counters(fabric, hosts)
    result = RealTimeRun(topology, specs, placement_step(mix),
                         Estimator(nominal_bw_mbps=nominal_bandwidth(topology)), fabric,
                         client, out, options, policy_name="fixed", runner=runner,
                         sampler=Sampler({}, [])).run()
    after = tcp_counters(fabric, hosts)
    jobs = {}
    for job in result["jobs"]:
        if job.get("status") != "finished":
            raise RuntimeError(f"calibration job {job['name']} did not finish: "
                               f"{job.get('status')}")
        its = sorted(iterations_of(job), key=lambda it: it.batch)
        times = [it.time_s for it in its if it.worker == 0][SKIP:] or [it.time_s for it in its]
        jobs[job["name"]] = {"jct_s": job["turnaround"], "iteration_s": statistics.median(times),
                             "startup_s": startup_s(job)}
    return {"jobs": jobs, "tcp": {k: after[k] - before[k] for k in after}}


def probe_sharers(capacity: float, names, nbytes: int):
    from mininet_tests.heavy_tail.predict import KEYS, PIPELINE_KEYS, cross_path
    from sluice_common.exchange import Sharer

    return [Sharer(n, nbytes, KEYS, cross_path(capacity), 0.0, PIPELINE_KEYS) for n in names]


# the mixes whose figure is the arriving jobs' (``*-probe-*``) mean JCT
ARRIVING = ("probes", "newcomers")


def model_figure(name: str, mix: list, capacity: float, buffer_bytes: float, c,
                 urgent_bytes: float | None = None) -> float:
    """The model's figure for a mix: the arriving jobs' mean JCT (``ARRIVING``), else the bulk
    jobs' mean iteration. ``urgent_bytes``: the leaves are fair-queued (the baseline's)."""
    from mininet_tests import fluid
    from mininet_tests.heavy_tail.predict import KEYS, PIPELINE_KEYS, SLOT_S, cross_path
    from sluice_common.exchange import share_egress

    if name in ARRIVING:
        jobs = [fluid.BatchJob(j.name, j.arrival, j.batches, j.bytes_per_batch, j.compute_s,
                               KEYS, PIPELINE_KEYS, cross_path(capacity)) for j in mix]
        jct = fluid.simulate_batches(jobs, "off", capacity, buffer_bytes, c,
                                     overhead_s=SLOT_S / 2, urgent_bytes=urgent_bytes)
        return statistics.mean(v for n, v in jct.items() if "-probe-" in n)
    its = share_egress(probe_sharers(capacity, [j.name for j in mix], BULK[0]), capacity,
                       buffer_bytes, c, urgent_bytes=urgent_bytes)
    return statistics.mean(its.values())


def read_measured(path: str, needs: tuple[str, ...] = ()) -> dict:
    """The measurements (``measured``) of an earlier calibration's JSON output at ``path``;
    a file that does not parse, or lacks them or one of the ``needs`` fields in them, is an
    InputError naming the file and the field."""
    try:
        data = json.loads(read_user_text(path))
    except json.JSONDecodeError as err:
        raise InputError(path, f"not JSON: {err}") from None
    measured = data.get("measured") if isinstance(data, dict) else None
    if not isinstance(measured, dict):
        raise InputError(path, "missing: the measurements of a calibration's JSON output",
                         field="measured")
    for name in needs:
        if name not in measured:
            raise InputError(path, "missing", field=f"measured.{name}")
    return measured
