"""Calibrate the exchange model (sluice_common.exchange) on the Mininet fabric.

    sudo .venv/bin/sluice calibrate exchange [--write] [--json [OUT]] [--from JSON]

On the heavy-tail experiment's fabric (two-rack, rack uplinks shaped at 12 Mbit/s, host
links 24 Mbit/s, the HTB tree with its 200-packet FIFO per class at every egress), runs
one emulated PS job at a time (1 server, 1 worker, no compute: every batch's time is its
exchange) over three paths: in-host (h1 -> h1), in-rack (h2 -> h1: two hops) and
cross-rack (h3 -> h1: four hops, the uplinks the bottleneck), each at a few
(bytes per batch, keys, window) points. The median per-batch time of each point (batches
after the second) is fitted by least squares (non-negative) to
``overhead_s + K per_key_s + 2 R hops hop_s + wire / (efficiency min(path)) + wire_local /
local_Bps`` (the model's linear terms); then two equal cross-rack jobs at once (one FIFO
class, no controller) fit ``queue_fill`` of the sharing model by bisection; last, through
the run loop the experiments and ``sluice run`` use (controller process, warm PS
processes, one FIFO class), small jobs alone give ``startup_s``, six bulk jobs at once
``queue_fill_per_sender`` and small jobs arriving among them ``startup_rounds``; then the
same bulk and small jobs on the short FIFO fit ``loss_timeouts`` and on the fair queue
``fair_round_bytes``, and newcomers that compute among two bulk jobs, with the default rule
on, ``priority_cost`` (``mininet_tests.calibration.queues``). Prints every
point's measured and fitted time and residual, the run-queue delay of the job's processes
(CPU wait: the machine is shared) and the load average before and after; ``--write``
replaces ``sluice_common/data/exchange_constants.yaml`` with the fit and its provenance;
``--from JSON`` fits the measurements an earlier ``--json`` output holds (no fabric).
About 7 minutes. Needs root (the fabric) and takes the fabric lock.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from mininet_tests.calibration.runs import (BATCHES, BULK, PATHS, POINTS, PROBE, RUN_TIMEOUT_S,
                                            SHARED, SKIP, UPLINK_MBPS, bisect_constant,
                                            driver_mix, loadavg, path_rates, probe_sharers,
                                            read_measured, run_mix)


def run_jobs(fabric, runner, out: Path, specs: list[tuple[str, str, str, int, int, int]],
             base_port: int, batches: dict[str, int] | None = None,
             delays: dict[str, float] | None = None) -> dict[str, dict]:
    """Run the given jobs (name, server, worker, bytes, keys, window), each ``delays[name]``
    seconds after the first (default: at once) with ``batches[name]`` batches (default
    BATCHES); per job the median per-batch exchange (s) after SKIP batches, its start-up
    and closing (launch to exit less the worker's batch times) and its processes' CPU wait."""
    batches, delays = batches or {}, delays or {}
    from ps_runtime.launcher import PSJob, WorkerOptions
    from ps_runtime.plan import HostPlan
    from mininet_tests.time_split import ProcessWaits
    from sluice_common.jobspec import JobSpec

    jobs = []
    for k, (name, server, worker, nbytes, keys, window) in enumerate(specs):
        spec = JobSpec(name=name, model="alexnet", dataset_size=1, epochs=1, batch_size=1,
                       max_gpus=1)
        bucket_mb = nbytes / keys / 2 ** 20 * 1.0001
        opts = WorkerOptions(compute="emulated", compute_s=0.0, bytes_per_batch=nbytes,
                             bucket_mb=bucket_mb, pipeline_keys=window, report_interval=5.0)
        jobs.append(PSJob(spec, HostPlan.on_hosts(fabric.topology, [server], [worker]), runner,
                          out / name, batches=batches.get(name, BATCHES),
                          base_port=base_port + 40 * k, options=opts))
    waits = ProcessWaits()
    t0 = time.monotonic()
    started: set[str] = set()
    try:
        done: dict[str, object] = {}
        while len(done) < len(jobs):
            for j in jobs:
                if j.spec.name not in started and time.monotonic() - t0 >= delays.get(j.spec.name, 0.0):
                    j.start()
                    started.add(j.spec.name)
                if j.spec.name in done or j.spec.name not in started:
                    continue
                waits.sample(j.spec.name, [p.popen.pid for p in j.processes
                                           if p.popen is not None and p.popen.poll() is None])
                if j.poll():
                    done[j.spec.name] = j.result()
            if time.monotonic() - t0 > RUN_TIMEOUT_S:
                raise RuntimeError(f"calibration jobs {list(done)} of {len(jobs)} done after {RUN_TIMEOUT_S} s")
            time.sleep(0.05)
    finally:
        for j in jobs:
            j.stop()
    wall = time.monotonic() - t0
    res = {}
    for j in jobs:
        result = done[j.spec.name]
        every = result.batches.get(0, [])
        times = [r.comm_s if r.comm_s is not None else r.time_s for r in every[SKIP:]]
        if not times:
            raise RuntimeError(f"{j.spec.name}: no batch times")
        res[j.spec.name] = {"batch_s": statistics.median(times), "batches": len(times),
                            "overhead_s": round(result.elapsed_s - sum(r.time_s for r in every), 4),
                            "cpu_wait_s": round(waits.wait_s(j.spec.name), 3),
                            "wall_s": round(wall, 2)}
    return res


def fit(rows: list[dict], burst_bytes: float):
    """Non-negative least squares of the model's linear terms; returns (constants dict,
    per-row fitted times)."""
    import numpy as np
    from scipy.optimize import nnls

    from sluice_common.exchange import features, fixed_s

    a = np.array([features(r["bytes"], r["keys"], r["path"], r["window"], burst_bytes)
                  for r in rows])
    y = np.array([r["measured_s"] - fixed_s(r["keys"], r["path"], r["window"]) for r in rows])
    # relative residuals (each row over its measured time: a 1 ms in-host batch counts as
    # much as a 0.5 s cross-rack one), columns scaled to order 1 for the solver
    w = 1.0 / np.array([r["measured_s"] for r in rows])
    aw = a * w[:, None]
    scale = np.maximum(np.abs(aw).max(axis=0), 1e-12)
    sol, _ = nnls(aw / scale, y * w)
    x = sol / scale
    pred = a @ x + np.array([fixed_s(r["keys"], r["path"], r["window"]) for r in rows])
    eff = 1.0 / x[3] if x[3] > 0 else 1.0
    local = 1.0 / x[4] if x[4] > 0 else 1e12
    return ({"overhead_s": float(x[0]), "per_key_s": float(x[1]), "hop_s": float(x[2]),
             "efficiency": float(min(1.0, eff)), "local_Bps": float(local)},
            [float(p) for p in pred])


def fit_queue_fill(c, jobs, capacity: float, buffer_bytes: float, measured: float,
                   name: str = "queue_fill") -> float:
    """The constant ``name`` (``queue_fill``, ``queue_fill_per_sender``) in [0, 1] for which
    the sharing model's mean iteration of ``jobs`` matches ``measured`` (bisection)."""
    from sluice_common.exchange import share_egress

    def model(q):
        got = share_egress(jobs, capacity, buffer_bytes, replace(c, **{name: q}))
        return statistics.mean(got.values())
    return bisect_constant(model, measured, 0.0, 1.0)[0]


def measure_fabric() -> dict:
    """Run every point and the contention point on the fabric (takes the fabric lock)."""
    from mininet_fabric.fabric import Fabric
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from ps_runtime.runners import MininetRunner
    from ps_runtime.warm import WarmRunner

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = loadavg()
    print(f"calibrate: load average before {load_before}", file=sys.stderr, flush=True)
    topology, _ = experiment_topology(UPLINK_MBPS)
    rows: list[dict] = []
    out = Path(tempfile.mkdtemp(prefix="sluice-calib-"))
    t_start = time.monotonic()
    try:
        with Fabric(topology, progress=False, tcp_congestion=None) as fabric:
            runner = WarmRunner(MininetRunner(fabric), ["h1", "h2", "h3"], per_host=3,
                                preload=("mxnet",), refill=False)
            try:
                runner.wait_ready()
                port = 30000
                for pname, server, worker in PATHS:
                    rates = path_rates(topology, server, worker)
                    for nbytes, keys, window in POINTS:
                        name = f"cal-{pname}-{nbytes // 1000}k-{keys}-{window}"
                        got = run_jobs(fabric, runner, out,
                                       [(name, server, worker, nbytes, keys, window)], port)[name]
                        port += 40
                        runner.fill()
                        runner.wait_ready()
                        rows.append({"point": name, "path_name": pname, "path": rates,
                                     "bytes": nbytes, "keys": keys, "window": window,
                                     "measured_s": got["batch_s"], "cpu_wait_s": got["cpu_wait_s"],
                                     "overhead_s": got["overhead_s"],
                                     "wall_s": got["wall_s"], "batches": got["batches"]})
                        print(f"calibrate: {name}: {got['batch_s'] * 1000:.1f} ms per batch, "
                              f"CPU wait {got['cpu_wait_s']:.2f} s of {got['wall_s']:.1f} s "
                              f"(load {loadavg()})", file=sys.stderr, flush=True)
                # contention: two equal cross-rack jobs in one FIFO class
                nbytes, keys, window = SHARED
                shared = run_jobs(fabric, runner, out,
                                  [("cal-shared-a", "h1", "h3", nbytes, keys, window),
                                   ("cal-shared-b", "h2", "h3", nbytes, keys, window)], port)
            finally:
                runner.close()

        driver, queues = measure_driver_points(out)
    finally:
        subprocess.run(["rm", "-rf", str(out)], check=False)
    return {"rows": rows, "shared": shared, "driver": driver, "queues": queues,
            "started": started,
            "load_before": load_before,
            "load_after": loadavg(), "wall_s": round(time.monotonic() - t_start, 1)}


def measure_driver_points(out: Path) -> tuple[dict[str, dict], dict]:
    """Run :func:`driver_mix` through the experiments' run loop (controller process,
    priority off, warm PS processes), then its jobs alone again with priority on (each
    registered with the controller, its rules in place, before it starts: ``cal-on-*``);
    per job its JCT and its median iteration after SKIP batches. Then the queue stage on
    the same fabric and pool (``queues.measure_queues``: the short FIFO, the
    fair queue and the priority stage), whose measurements come second."""
    from dataclasses import replace as copy

    from mininet_tests.calibration.queues import measure_queues

    from end_to_end.run import environment, warm_processes
    from mininet_tests.heavy_tail.fabric_setup import (PS_HOSTS, WORKER_HOSTS, experiment_topology,
                                                       machine_cc, measure_rtt, topology_arg)
    from sluice_common.rank_rules import DEFAULT_RULE

    topology, _ = experiment_topology(UPLINK_MBPS)
    mixes = {"off": driver_mix()}
    mixes["on"] = [copy(j, name=j.name.replace("cal-alone", "cal-on"))
                   for j in mixes["off"] if j.name.startswith("cal-alone")]
    got = {}
    with environment(topology, topology_arg(topology, out), out, rank=DEFAULT_RULE,
                     tcp_congestion=machine_cc()) as (fabric, client), \
            warm_processes(topology, fabric, "emulated", refill=False, timeout_s=900,
                           per_host=len(mixes["off"]) + 1) as runner:
        for k, (mode, mix) in enumerate(mixes.items()):
            ran = run_mix(topology, fabric, client, runner, out / f"driver-{mode}", mix,
                          mode == "on", 20000 + 2000 * k)
            got.update({n: {"jct_s": v["jct_s"], "iteration_s": v["iteration_s"]}
                        for n, v in ran["jobs"].items()})
        rtt_s = measure_rtt(fabric, WORKER_HOSTS[0], PS_HOSTS[0])
        queues = measure_queues(topology, fabric, client, runner, out, rtt_s, 26000)
    return got, queues


def fit_many(c, driver: dict[str, dict], capacity: float, buffer_bytes: float) -> float:
    """``queue_fill_per_sender`` for which the model's mean iteration of the BULK_JOBS jobs
    matches their measured median iterations (``queue_fill`` already fitted)."""
    names = [n for n in driver if n.startswith("cal-bulk")]
    return fit_queue_fill(c, probe_sharers(capacity, names, BULK[0]), capacity, buffer_bytes,
                          statistics.mean(driver[n]["iteration_s"] for n in names),
                          "queue_fill_per_sender")


def fit_startup(c, driver: dict[str, dict], capacity: float, buffer_bytes: float) -> dict:
    """``startup_s``: the alone jobs' median JCT less half a slot, their batches and
    ``kv.init``'s exchange (every key at once, window 0, no compute) at the model's time
    alone; ``startup_rounds``: the probes' median
    JCT beyond that and their batches at the model's shared iteration, over the model's
    queue wait for a probe among the bulk jobs (one FIFO class); ``startup_priority_s``:
    the same jobs alone with priority on, their median JCT beyond ``startup_s`` (the
    registration with the controller, whose rules are in place before a job starts)."""
    from mininet_tests.heavy_tail.predict import SLOT_S
    from sluice_common.exchange import egress_state

    (probe,) = probe_sharers(capacity, ["probe"], PROBE[0])
    init = replace(probe, compute_s=0.0, window=0)          # kv.init's exchange
    batches = PROBE[1]
    run_alone = batches * probe.alone_s(c) + init.alone_s(c)
    alone = [v["jct_s"] - SLOT_S / 2 - run_alone
             for n, v in driver.items() if n.startswith("cal-alone")]
    base = max(0.0, statistics.median(alone))
    bulk = probe_sharers(capacity, [n for n in driver if n.startswith("cal-bulk")], BULK[0])
    its, waits = egress_state(bulk + [probe], capacity, buffer_bytes, c)
    init_shared = egress_state(bulk + [init], capacity, buffer_bytes, c)[0]["probe"]
    extra = [v["jct_s"] - SLOT_S / 2 - base - batches * its["probe"] - init_shared
             for n, v in driver.items() if n.startswith("cal-probe")]
    wait = waits["probe"]
    rounds_ = max(0.0, statistics.median(extra)) / wait if wait > 0 else 0.0
    on = [v["jct_s"] - SLOT_S / 2 - run_alone - base
          for n, v in driver.items() if n.startswith("cal-on")]
    return {"startup_s": base, "startup_rounds": rounds_, "startup_wait_s": wait,
            "startup_priority_s": max(0.0, statistics.median(on)) if on else 0.0,
            "startup_alone_samples": [round(x, 3) for x in alone],
            "startup_probe_extra": [round(x, 3) for x in extra],
            "startup_priority_samples": [round(x, 3) for x in on]}


def fit_constants(m: dict):
    """Fit the exchange constants to the measurements ``m`` (``measure_fabric``'s): the
    constants, the model's time per point, queue_fill, queue_fill_per_sender and the
    start-up fit (None without run-loop points), the measured shared batch time."""
    from mininet_fabric.baselines import burst_packets
    from mininet_fabric.priority import LEAF_QUEUE_PACKETS
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from sluice_common.exchange import (MTU_BYTES, Sharer, batch_exchange_s, default_constants,
                                        with_fit)

    rows, shared = m["rows"], m["shared"]
    topology, capacity = experiment_topology(UPLINK_MBPS)
    burst = float(burst_packets() * MTU_BYTES)
    values, _ = fit(rows, burst)
    c = replace(with_fit(default_constants(), values, {}), burst_bytes=burst)
    # the model's time with the constants as used (efficiency at most 1)
    pred = [batch_exchange_s(r["bytes"], r["keys"], r["path"], r["window"], c) for r in rows]
    nbytes, keys, window = SHARED
    cross = path_rates(topology, "h1", "h3")
    sharers = [Sharer(n, nbytes, keys, cross, 0.0, window) for n in shared]
    measured_shared = statistics.mean(v["batch_s"] for v in shared.values())
    buffer_bytes = LEAF_QUEUE_PACKETS * MTU_BYTES
    qf = fit_queue_fill(c, sharers, capacity, buffer_bytes, measured_shared)
    c = replace(c, queue_fill=round(float(qf), 4))
    start = many = queues = None
    if m.get("driver"):
        many = fit_many(c, m["driver"], capacity, buffer_bytes)
        c = replace(c, queue_fill_per_sender=round(float(many), 4))
        start = fit_startup(c, m["driver"], capacity, buffer_bytes)
        c = replace(c, startup_s=round(start["startup_s"], 4),
                    startup_rounds=round(start["startup_rounds"], 2),
                    startup_priority_s=round(start["startup_priority_s"], 4))
    if m.get("queues"):
        from mininet_tests.calibration.queues import fit_queues

        c, queues = fit_queues(c, m["queues"], capacity)
    return c, pred, qf, many, start, measured_shared, queues


CONSTANTS = ("overhead_s", "per_key_s", "hop_s", "efficiency", "local_Bps", "queue_fill",
             "queue_fill_per_sender", "startup_s", "startup_rounds", "startup_priority_s",
             "loss_timeouts", "fair_round_bytes", "priority_cost")


def calibrate(write: bool, from_json: str | None, json_out: str | None) -> int:
    """Measure on the fabric (or take ``from_json``'s measurements), fit, report; with
    ``write`` replace the shipped constants; ``json_out``: the JSON output ("-": stdout)."""
    from mininet_tests.calibration.queues import print_fit
    from mininet_tests.calibration.report import provenance_of, report_fit, write_json
    from sluice_common.exchange import DATA_FILE, save_constants

    m = read_measured(from_json, ("rows", "shared")) if from_json else measure_fabric()
    c, pred, qf, many, start, measured_shared, queues = fit_constants(m)
    figures, rel = report_fit(m, c, pred, qf, many, start, measured_shared)
    if queues:
        print_fit(queues)
    else:
        print("queue stage: not measured in this input; loss_timeouts and fair_round_bytes "
              "unchanged", flush=True)
    provenance = provenance_of(m, start, rel, measured_shared, from_json, queues)
    c = replace(c, provenance=provenance)
    if write:
        path = save_constants(c, DATA_FILE, comment=(
            "Constants of sluice_common.exchange, fitted on the fabric by\n"
            "`sluice calibrate exchange --write`; see provenance."))
        print(f"wrote {path}", flush=True)
    write_json(json_out, {"figures": figures, "measured": m,
                          "constants": {k: getattr(c, k) for k in CONSTANTS},
                          "provenance": provenance})
    return 0
