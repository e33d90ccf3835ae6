"""First packets in a fresh fabric: all-pairs ping as soon as the switches connect.

A real `sluice controller` process and a Mininet/OVS fabric (the harness and its lock),
``--runs`` times: the moment every switch is connected, one ping per ordered host pair
(``Fabric.ping_all``: 2 s for a reply), while the controller may still be finding links
(LLDP) and hosts (ARP). Then, once every host is located, the same pings again: the
baseline, measured in the same run on the settled fabric. ``--hogs`` busy loops load the
machine's cores meanwhile (a loaded CI machine is where a first packet got lost), and
``--stats-interval`` spaces the controller's LLDP and ARP probes (default 2.5 s, so that
the first pings fall inside discovery).

    sudo .venv/bin/python -m bench.reliability.first_ping [--topology leaf-spine]
        [--runs 8] [--hogs 2] [--stats-interval 2.5] [--json [OUT]]

Prints per run the loss and the pairs without a reply, then the figures. Progress goes
to stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench import harness
from bench.controller.bench_controller import SLUICE, process, wait_hosts

from controller.client import ControllerClient
from mininet_fabric.fabric import Fabric
from ps_runtime.ports import free_port

ADMIN = "first-ping-admin-token-0123"


def log(text: str) -> None:
    print(f"first_ping: {text}", file=sys.stderr, flush=True)


def one_run(topology: str, stats_interval: float) -> dict:
    ofp, api = free_port(), free_port()
    env = dict(os.environ, SLUICE_ADMIN_TOKEN=ADMIN)
    argv = [SLUICE, "controller", "--topology", topology, "--ofp-port", str(ofp),
            "--api", f"127.0.0.1:{api}", "--stats-interval", str(stats_interval),
            "--log-level", "warning"]
    with process(argv, ("127.0.0.1", api), env), \
            Fabric(topology, controller=f"127.0.0.1:{ofp}") as fab:
        t0 = time.monotonic()
        first = fab.ping_all()
        first_s, first_lost = time.monotonic() - t0, list(fab.lost_pairs)
        wait_hosts(ControllerClient(f"http://127.0.0.1:{api}", ADMIN), len(fab.topology.hosts))
        t0 = time.monotonic()
        settled = fab.ping_all()
        return {"first_loss": first, "first_s": round(first_s, 2), "first_lost": first_lost,
                "settled_loss": settled, "settled_s": round(time.monotonic() - t0, 2),
                "settled_lost": list(fab.lost_pairs),
                "pairs": len(fab.topology.hosts) * (len(fab.topology.hosts) - 1)}


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--topology", default="leaf-spine")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--hogs", type=int, default=2, help="busy loops while it runs")
    ap.add_argument("--stats-interval", type=float, default=2.5)
    args = ap.parse_args()
    runs = []
    for i in range(args.runs):
        hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.hogs)]
        try:
            run = one_run(args.topology, args.stats_interval)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        runs.append(run)
        print(f"run {i + 1}/{args.runs}: first pings {run['first_loss']:.2f} % lost in "
              f"{run['first_s']} s {run['first_lost'] or ''}; settled {run['settled_loss']:.2f} % "
              f"in {run['settled_s']} s",
              flush=True)
    pairs = sum(r["pairs"] for r in runs)
    lost_first = sum(len(r["first_lost"]) for r in runs)
    lost_settled = sum(len(r["settled_lost"]) for r in runs)
    figures = [
        harness.figure("runs losing a first ping", sum(1 for r in runs if r["first_lost"]),
                       f"of {len(runs)}"),
        # the settled pass should lose none: a ratio against 0 says nothing, so a note
        harness.figure("first pings lost", 100 * lost_first / pairs, "%",
                       note=f"(settled fabric, same runs: {100 * lost_settled / pairs:.2f} %)"),
        harness.figure("first all-pairs pass (mean)", sum(r["first_s"] for r in runs) / len(runs),
                       "s", baseline=sum(r["settled_s"] for r in runs) / len(runs),
                       baseline_unit="s settled"),
    ]
    if args.json:
        harness.write_json(args.json, {"args": vars(args), "runs": runs, "figures": figures})
    return 0 if lost_first == lost_settled == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
