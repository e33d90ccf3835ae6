"""What a shallow FIFO loses, and what that costs jobs that share it (why the
exchange model charges drops as timeouts of small messages, not as a goodput loss).

    sudo .venv/bin/python -m bench.fabric.shallow_loss [--cc bbr,cubic] [--runs N] [--json [OUT]]

On the heavy-tail experiment's fabric (two-rack, rack uplinks shaped at 12 Mbit/s, the
controller process, warm PS processes), with every egress leaf the experiment's
``off-shallow`` FIFO (about twice the bandwidth-delay product of the measured idle RTT, at
least one HTB burst), the six bulk cross-rack jobs of the exchange calibration arrive at once
(no compute: 300 kB a batch, 12 batches). Per congestion control and run (interleaved;
the machine's congestion control is restored afterwards, also on failure) it prints the
hosts' retransmitted segments and timeouts over the run, their bytes' share of all bytes
sent (the jobs' own, known from their batches and ``kv.init``'s, plus the resent ones),
and the jobs' median iteration beside the exchange model's (the shipped constants, with
its loss and timeout term, which charges a bulk key's drops little).

What it showed (2026-11-27, five BBR and four CUBIC runs): BBR resends 31-33 % of the
bytes and CUBIC 9-10 %, yet the bulk jobs' median iteration is 0.78-1.10x the exchange
model's without a loss term (BBR; CUBIC 0.83-0.98x). A segment dropped at the bottleneck's
own queue never used the bottleneck, so the drops waste none of its capacity, and while
one sender recovers the others fill the link. A goodput term (each rate times one minus
the share) would make these jobs 31-85 % slow. About 2 minutes per congestion control and
run. Needs root.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from bench import harness
from mininet_tests.calibration.runs import BULK, BULK_JOBS, loadavg, run_mix

CONGESTION_CONTROLS = ("bbr", "cubic", "reno")
MSS_BYTES = 1448           # a full segment's payload (1500 MTU less IP, TCP and timestamps)
ARRIVAL_S = 1.0


def bulk_mix() -> list:
    """BULK_JOBS cross-rack jobs of BULK (bytes, batches) arriving at once, no compute."""
    from mininet_tests.heavy_tail.mix import MixJob

    return [MixJob(f"cal-loss-{k}", ARRIVAL_S, BULK[1], BULK[0], 1.0, 0.0)
            for k in range(BULK_JOBS)]


def sent_bytes(mix: list) -> float:
    """What the jobs send over the uplinks, both directions: each batch and ``kv.init``'s
    exchange push and pull the batch's bytes once each."""
    return sum(2.0 * j.bytes_per_batch * (j.batches + 1) for j in mix)


def retrans_share(retrans_segs: int, goodput_bytes: float) -> float:
    """Retransmitted bytes over all bytes sent: ``segs * MSS / (goodput + segs * MSS)``."""
    if retrans_segs < 0 or not goodput_bytes > 0:
        raise ValueError("need retrans_segs >= 0 and goodput_bytes > 0")
    lost = retrans_segs * MSS_BYTES
    return lost / (goodput_bytes + lost)


def model_iteration_s(rtt_s: float) -> float:
    """The exchange model's iteration of one of the bulk jobs beside the others in the
    shallow FIFO (``share_egress``, the shipped constants)."""
    from mininet_tests.calibration.runs import UPLINK_MBPS, probe_sharers
    from mininet_tests.heavy_tail.predict import buffer_bytes
    from mininet_tests.heavy_tail.fabric_setup import experiment_topology
    from sluice_common.exchange import share_egress

    _, capacity = experiment_topology(UPLINK_MBPS)
    sharers = probe_sharers(capacity, [j.name for j in bulk_mix()], BULK[0])
    return share_egress(sharers, capacity, buffer_bytes("off-shallow", capacity, rtt_s))[
        sharers[0].name]


def measure(cc: str, out: Path) -> dict:
    """One congestion control: the bulk mix through the shallow FIFO; its TCP counters."""
    from end_to_end.run import environment, warm_processes
    from mininet_fabric import baselines as bl
    from mininet_tests.heavy_tail.fabric_setup import (PS_HOSTS, WORKER_HOSTS, experiment_topology,
                                                       measure_rtt, topology_arg)
    from mininet_tests.calibration.runs import UPLINK_MBPS
    from sluice_common.rank_rules import DEFAULT_RULE

    topology, capacity = experiment_topology(UPLINK_MBPS)
    mix = bulk_mix()
    with environment(topology, topology_arg(topology, out), out, rank=DEFAULT_RULE,
                     tcp_congestion=cc) as (fabric, client), \
            warm_processes(topology, fabric, "emulated", refill=False, timeout_s=900,
                           per_host=len(mix) + 1) as runner:
        rtt_s = measure_rtt(fabric, WORKER_HOSTS[0], PS_HOSTS[0])
        limit = bl.shallow_limit_packets(capacity * 8 / 1e6, rtt_s)
        fabric.install_priority_tree(partial(bl.egress_tree, "off-shallow", rtt_s=rtt_s))
        ran = run_mix(topology, fabric, client, runner, out / f"loss-{cc}", mix, False, 24000)
    tcp = ran["tcp"]
    goodput = sent_bytes(mix)
    return {"cc": cc, "rtt_s": round(rtt_s, 6), "shallow_limit_packets": limit,
            "retrans_segs": tcp["retrans_segs"], "timeouts": tcp["timeouts"],
            "goodput_bytes": goodput,
            "share": round(retrans_share(tcp["retrans_segs"], goodput), 4),
            "median_iteration_s": round(statistics.median(
                v["iteration_s"] for v in ran["jobs"].values()), 4),
            "model_iteration_s": round(model_iteration_s(rtt_s), 4)}


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--cc", default="bbr,cubic",
                    help="congestion controls to measure, comma-separated (default bbr,cubic)")
    ap.add_argument("--runs", type=int, default=1, help="runs per congestion control; the "
                    "figures are medians over them (default 1)")
    args = ap.parse_args()

    ccs = [x.strip() for x in args.cc.split(",") if x.strip()]
    bad = [x for x in ccs if x not in CONGESTION_CONTROLS]
    if bad or not ccs:
        print(f"shallow_loss: --cc: must be some of {', '.join(CONGESTION_CONTROLS)}, "
              f"got {args.cc!r}", file=sys.stderr)
        return 2
    if not 1 <= args.runs <= 9:
        print(f"shallow_loss: --runs: must be 1..9, got {args.runs}", file=sys.stderr)
        return 2
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = loadavg()
    runs: dict[str, list[dict]] = {cc: [] for cc in ccs}
    for k in range(args.runs):          # interleaved, so a drift in the machine hits both
        for cc in ccs:
            print(f"shallow_loss: {BULK_JOBS} bulk jobs through the shallow FIFO, TCP {cc}, "
                  f"run {k + 1}/{args.runs} (load {loadavg()})", file=sys.stderr, flush=True)
            # the run's logs are not kept (as the calibration's)
            with tempfile.TemporaryDirectory(prefix=f"sluice-loss-{cc}-") as out:
                g = measure(cc, Path(out))
            runs[cc].append(g)
            print(f"shallow_loss: {cc}: {g['shallow_limit_packets']}-packet FIFO (idle RTT "
                  f"{1000 * g['rtt_s']:.2f} ms): {g['retrans_segs']} segments retransmitted, "
                  f"{g['timeouts']} timeouts, share {100 * g['share']:.1f} %; median iteration "
                  f"{1000 * g['median_iteration_s']:.0f} ms, model "
                  f"{1000 * g['model_iteration_s']:.0f} ms", file=sys.stderr, flush=True)
    got = {cc: {"share": round(statistics.median(g["share"] for g in gs), 4), "runs": gs}
           for cc, gs in runs.items()}
    figures = []
    for cc, g in got.items():
        figures.append(harness.figure(f"shallow FIFO retransmitted share, {cc}",
                                      100 * g["share"], "%"))
        figures.append(harness.figure(
            f"bulk iteration measured / model, {cc}",
            statistics.median(r["median_iteration_s"] / r["model_iteration_s"] for r in g["runs"]),
            "x"))
    provenance = {"command": f"python -m bench.fabric.shallow_loss --cc {','.join(ccs)} "
                             f"--runs {args.runs}",
                  "date": started, "load_average_before": load_before,
                  "load_average_after": loadavg(), "jobs": BULK_JOBS,
                  "bytes_per_batch": BULK[0], "batches": BULK[1], "measured": got}
    harness.write_json(args.json, {"figures": figures, "provenance": provenance})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
