"""Check the exchange model against one, two and six senders under each egress discipline.

    sudo .venv/bin/python -m bench.fabric.check_exchange [--json [OUT]] [--from JSON] [--pool N]

On the heavy-tail experiment's fabric and run loop (controller process, warm PS
processes, priority off), under each registered baseline at every switch port
(``mininet_fabric.baselines``: the deep FIFO, the short FIFO, per-flow DRR, ...), runs five
scenarios (:func:`scenarios`): one bulk job alone,
two bulk jobs at once, six at once, three small probes arriving one by one among two
bulk jobs, and six newcomers of the heavy-tail's medium size arriving one by one among
two bulk jobs. Per scenario it prints the measured figure against the model's with the
shipped constants (the bulk jobs' mean iteration against
:func:`sluice_common.exchange.share_egress`, the arriving jobs' mean JCT against
:func:`mininet_tests.fluid.simulate_batches`; :func:`mininet_tests.calibration.runs.model_figure`),
and per discipline the share of the bytes
the hosts resent and their retransmission timeouts, with the load average: the model's
FIFO queue term was calibrated under the load the experiments run at. A check, not a
fit: it writes no constants. ``--from JSON`` compares the measurements of an earlier
``--json`` output again (no fabric). ``--pool N``: N warm PS processes per host instead of
one more than the largest scenario needs (the heavy-tail experiment keeps 17: its 16 jobs
and one), to see whether the idle pool's size changes the figures. About 8 minutes; needs
root and takes the fabric lock.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from bench import harness
from mininet_fabric import baselines as bl
from mininet_tests.calibration.runs import (ARRIVING, BULK, UPLINK_MBPS, loadavg, model_figure,
                                           run_mix)

PROBE = (150_000, 2)            # bytes per batch, batches
PROBE_AT_S = (2.0, 4.5, 7.0)    # the probes' arrivals among two bulk jobs
# newcomers: jobs of the heavy-tail's medium size (bytes per batch, batches) arriving
# NEWCOMER_GAP_S apart among two bulk jobs of NEWCOMER_BULK_BATCHES batches
NEWCOMER, NEWCOMERS, NEWCOMER_GAP_S, NEWCOMER_BULK_BATCHES = (600_000, 4), 6, 3.0, 40
MSS_BYTES = 1448
# every batch, and kv.init's exchange, moves its bytes once each way
KV_INIT_BATCHES = 1


def scenarios() -> dict[str, list]:
    """Scenario -> its jobs (``mininet_tests.heavy_tail.mix.MixJob``, no compute); bulk jobs
    are named ``*-bulk-*``, arriving ones (probes, newcomers) ``*-probe-*``."""
    from mininet_tests.heavy_tail.mix import MixJob

    def bulk(tag: str, n: int, batches: int = BULK[1]) -> list:
        return [MixJob(f"{tag}-bulk-{k}", 0.0, batches, BULK[0], 1.0, 0.0) for k in range(n)]

    probes = [MixJob(f"probes-probe-{k}", at, PROBE[1], PROBE[0], 1.0, 0.0)
              for k, at in enumerate(PROBE_AT_S)]
    newcomers = [MixJob(f"newcomers-probe-{k}", 3.0 + k * NEWCOMER_GAP_S, NEWCOMER[1],
                        NEWCOMER[0], 1.0, 0.0) for k in range(NEWCOMERS)]
    return {"alone": bulk("alone", 1), "two": bulk("two", 2), "six": bulk("six", 6),
            "probes": bulk("probes", 2, 16) + probes,
            "newcomers": bulk("newcomers", 2, NEWCOMER_BULK_BATCHES) + newcomers}


def sent_bytes(mix: list) -> float:
    return sum(2 * (j.batches + KV_INIT_BATCHES) * j.bytes_per_batch for j in mix)


def measured_figure(name: str, jobs: dict[str, dict]) -> float:
    if name in ARRIVING:
        return statistics.mean(v["jct_s"] for n, v in jobs.items() if "-probe-" in n)
    return statistics.mean(v["iteration_s"] for n, v in jobs.items() if "-bulk-" in n)


def compare(measured: dict, c=None) -> list[dict]:
    """One row per (discipline, scenario) measured: figure, measured, model, error %, and
    the run's resent share and timeouts (pure: ``measured`` as :func:`measure` returns)."""
    from mininet_tests.heavy_tail.predict import buffer_bytes
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from sluice_common.exchange import default_constants

    c = c or default_constants()
    _, capacity = experiment_topology(UPLINK_MBPS)
    mixes = scenarios()
    rows = []
    for disc in bl.queues():       # queue disciplines (no host tagging)
        buffer = buffer_bytes(disc, capacity, measured.get("rtt_s"))
        for name, mix in mixes.items():
            run = measured.get("runs", {}).get(f"{disc}/{name}")
            if run is None:
                continue
            got = measured_figure(name, run["jobs"])
            model = model_figure(name, mix, capacity, buffer, c, bl.urgent_bytes(disc))
            rows.append({"discipline": disc, "scenario": name,
                         "figure": "mean JCT" if name in ARRIVING else "mean iteration",
                         "measured_s": round(got, 4), "model_s": round(model, 4),
                         "error_pct": round(100 * (model / got - 1), 1),
                         "resent_share": round(run["tcp"]["retrans_segs"] * MSS_BYTES
                                               / sent_bytes(mix), 4),
                         "timeouts": run["tcp"]["timeouts"], "load": run.get("load")})
    return rows


def measure(pool: int | None = None) -> dict:
    """Every scenario under every discipline on the fabric (the deep FIFO put back after),
    with ``pool`` warm PS processes per host (default: one more than the largest scenario)."""
    from end_to_end.run import environment, warm_processes
    from mininet_fabric import baselines as bl
    from mininet_tests.heavy_tail.fabric_setup import (PS_HOSTS, WORKER_HOSTS, experiment_topology,
                                                       machine_cc, measure_rtt, topology_arg)
    from sluice_common.rank_rules import DEFAULT_RULE

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before, t0 = loadavg(), time.monotonic()
    topology, _ = experiment_topology(UPLINK_MBPS)
    mixes = scenarios()
    per_host = pool or max(len(m) for m in mixes.values()) + 1
    out = Path(tempfile.mkdtemp(prefix="sluice-check-"))
    runs: dict[str, dict] = {}
    try:
        with environment(topology, topology_arg(topology, out), out, rank=DEFAULT_RULE,
                         tcp_congestion=machine_cc()) as (fabric, client), \
                warm_processes(topology, fabric, "emulated", refill=False, timeout_s=900,
                               per_host=per_host) as runner:
            rtt_s = measure_rtt(fabric, WORKER_HOSTS[0], PS_HOSTS[0])
            try:
                k = 0
                for disc in bl.queues():
                    fabric.install_priority_tree(partial(bl.egress_tree, disc, rtt_s=rtt_s))
                    for name, mix in mixes.items():
                        run = run_mix(topology, fabric, client, runner, out / f"{disc}-{name}",
                                      mix, False, 20000 + 1000 * k)
                        k += 1
                        run["load"] = round(os.getloadavg()[0], 1)
                        runs[f"{disc}/{name}"] = run
                        print(f"check: {disc}, {name}: {measured_figure(name, run['jobs']):.3f} s, "
                              f"TCP {run['tcp']} (load {loadavg()})", file=sys.stderr, flush=True)
            finally:
                fabric.install_priority_tree()       # the deep FIFO, as every run expects
    finally:
        subprocess.run(["rm", "-rf", str(out)], check=False)
    return {"runs": runs, "rtt_s": round(rtt_s, 6), "started": started,
            "pool_per_host": per_host,
            "load_before": load_before, "load_after": loadavg(),
            "wall_s": round(time.monotonic() - t0, 1)}


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--from", dest="from_json", default=None, metavar="JSON",
                    help="compare the measurements of an earlier run's --json output (no fabric)")
    ap.add_argument("--pool", type=int, default=None, metavar="N",
                    help="warm PS processes per host (default: one more than the largest "
                         "scenario needs)")
    args = ap.parse_args()
    import json

    m = (json.loads(Path(args.from_json).read_text())["measured"] if args.from_json
         else measure(args.pool))
    rows = compare(m)
    print("| discipline | scenario | figure | measured s | model s | model error | resent | "
          "timeouts | load |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['discipline']} | {r['scenario']} | {r['figure']} | {r['measured_s']:.3f} | "
              f"{r['model_s']:.3f} | {r['error_pct']:+.1f} % | {100 * r['resent_share']:.1f} % | "
              f"{r['timeouts']} | {r['load']} |")
    print(f"\nstarted {m['started']}; warm pool {m.get('pool_per_host', '?')} per host; load "
          f"average before {m['load_before']}, after {m['load_after']}; {m['wall_s']:.0f} s",
          flush=True)
    figures = [harness.figure(f"{r['discipline']} {r['scenario']} model error", r["error_pct"], "%")
               for r in rows]
    harness.write_json(args.json, {"figures": figures, "rows": rows, "measured": m})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
