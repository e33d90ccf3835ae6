"""No host can buy priority: a registered PS flow against hostile hosts (two-rack).

    .venv/bin/python -m mininet_tests.experiment_spoofing [--seconds 8] [--json OUT.json]

A PS job is registered with the controller (server h1:5201, worker h3); its push flow
h3 -> h1:5201 (iperf3 TCP) crosses tor2's 50 Mbit/s uplink. h4, in the same rack, then
attacks through that uplink with packets crafted by scapy (mininet_tests.spoof_traffic):

1. ``ps_only``: the PS flow alone (its priority, nothing else).
2. ``dscp56``: h4 floods h2 with UDP marked DSCP 56 (CS7, the most urgent class) at
   twice the uplink rate. ``dscp56_class``: the HTB class of tor2's uplink that took the
   flood (its packet counters; 7 = least urgent); the DSCP they arrive with at h2 is
   ``dscp56_arrived_class``.
3. ``forged``: h4 floods h1:5201 with TCP segments carrying the worker's source address
   (h3) and the PS port, DSCP 56. ``forged_delivered_mbps``: what reached h1.

The PS flow's throughput is measured in each phase (receiver side, first second
omitted); it should keep >= 90 % of its ``ps_only`` throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from mininet_tests.priority_check import _wait_listening, receiver_mbps
from topologies import load_topology
from topologies.priority_classes import HTB_PARENT_CLASS, level_of_dscp

PS_PORT, WORKER_PORT, FLOOD_PORT = 5201, 5301, 7777
SERVER, WORKER, ATTACKER, VICTIM = "h1", "h3", "h4", "h2"
REPO = str(Path(__file__).resolve().parents[1])


def _tool(fabric, host: str, *args: str):
    env = dict(os.environ, PYTHONPATH=REPO)
    return fabric.popen(host, sys.executable, "-m", "mininet_tests.spoof_traffic", *args,
                        env=env, stdout=-1, stderr=-1, text=True)


def _json(proc, what: str, timeout: float) -> dict:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}): {err[-500:]}")
    return json.loads(out.strip().splitlines()[-1])


def phase(fabric, seconds: float, attack: str | None, flood_mbps: float) -> dict:
    """The PS flow for ``seconds`` (+1 s omitted), with the given attack beside it."""
    uplink = fabric.intf("tor2", "spine1")       # where the flows compete (HTB classes)
    before = fabric.class_stats(uplink)
    server = fabric.popen(SERVER, "iperf3", "-s", "-1", "-p", str(PS_PORT))
    _wait_listening(fabric, [(SERVER, PS_PORT)])
    helpers = {}
    span = str(seconds + 1)
    if attack == "dscp56":
        helpers["count"] = _tool(fabric, VICTIM, "count", "--proto", "udp", "--port",
                                 str(FLOOD_PORT), "--seconds", span)
        helpers["blast"] = _tool(fabric, ATTACKER, "blast", "--src", fabric.ip(ATTACKER),
                                 "--dst", fabric.ip(VICTIM), "--proto", "udp", "--dport",
                                 str(FLOOD_PORT), "--tos", str(56 << 2), "--mbps",
                                 str(flood_mbps), "--seconds", span)
    elif attack == "forged":
        helpers["count"] = _tool(fabric, SERVER, "count", "--proto", "tcp", "--port",
                                 str(PS_PORT), "--src", fabric.ip(WORKER), "--sport", "31337",
                                 "--seconds", span)
        helpers["blast"] = _tool(fabric, ATTACKER, "blast", "--src", fabric.ip(WORKER),
                                 "--dst", fabric.ip(SERVER), "--proto", "tcp", "--dport",
                                 str(PS_PORT), "--sport", "31337", "--tos", str(56 << 2),
                                 "--mbps", str(flood_mbps), "--seconds", span)
    client = fabric.popen(WORKER, "iperf3", "-c", fabric.ip(SERVER), "-p", str(PS_PORT),
                          "-t", str(int(seconds) + 1), "-O", "1", "-J")
    out, _ = client.communicate(timeout=seconds + 30)
    result = {"ps_mbps": round(receiver_mbps(out if isinstance(out, str) else out.decode()), 2)}
    for name, proc in helpers.items():
        result[name] = _json(proc, f"spoof_traffic {name}", seconds + 30)
    after = fabric.class_stats(uplink)
    # packets each HTB class of the uplink sent or dropped during the phase, by level
    result["uplink_class_packets"] = {
        int(cid.split(":")[1], 16) - 1: (after[cid]["packets"] + after[cid]["dropped"])
        - (before.get(cid, {}).get("packets", 0) + before.get(cid, {}).get("dropped", 0))
        for cid in after if cid.startswith("1:") and cid != HTB_PARENT_CLASS}
    try:
        server.wait(timeout=5)
    except Exception:
        server.kill()
    return result


def run(seconds: float = 8.0, out: Path | None = None) -> dict:
    from end_to_end.run import environment

    topology = load_topology("two-rack")
    bottleneck = topology.path_bandwidth(WORKER, SERVER) * topology.emulation_bw_scale
    out = out or Path(f"runs/experiment-spoofing-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    with environment(topology, "two-rack", out) as (fabric, client):
        job = {"id": "ps", "servers": [{"id": "s0", "ip": fabric.ip(SERVER), "port": PS_PORT}],
               "workers": [{"id": "w0", "ip": fabric.ip(WORKER), "port": WORKER_PORT}]}
        client.register_job(job, wait=True)
        push = next(f for f in client.flows("ps")["flows"] if f["kind"] == "push")
        phases = {}
        for attack in (None, "dscp56", "forged"):
            print(f"experiment_spoofing: PS flow with attack {attack or 'none'} "
                  f"({seconds:g} s)", file=sys.stderr, flush=True)
            phases[attack or "none"] = phase(fabric, seconds, attack, 2 * bottleneck)
    d56 = phases["dscp56"]
    arrived = Counter({int(k): v for k, v in d56["count"]["dscp_packets"].items()})
    # The class the flood was served at, read off the switch: the uplink class (other
    # than the PS flow's) that handled the most packets more than with the PS flow
    # alone. (At the receiver a starved least-urgent flood may not show at all.)
    alone = phases["none"]["uplink_class_packets"]
    extra = {lv: n - alone.get(lv, 0) for lv, n in d56["uplink_class_packets"].items()
             if lv != push["level"] and 0 <= lv < 8}
    only = phases["none"]["ps_mbps"]
    result = {
        "ps_only_mbps": only,
        "ps_with_dscp56_mbps": d56["ps_mbps"],
        "ps_with_forged_mbps": phases["forged"]["ps_mbps"],
        "dscp56_class": max(extra, key=extra.get) if extra and max(extra.values()) > 0
        else None,
        "dscp56_arrived_class": level_of_dscp(arrived.most_common(1)[0][0]) if arrived
        else None,
        "dscp56_uplink_extra_packets_by_level": dict(sorted(extra.items())),
        "forged_delivered_mbps": phases["forged"]["count"]["mbps"],
        # context
        "ps_level": push["level"], "ps_dscp": push["dscp"],
        "bottleneck_mbps": bottleneck,
        "dscp56_delivered_mbps": d56["count"]["mbps"],
        "dscp56_arrived_dscp_packets": dict(sorted(arrived.items())),
        "dscp56_sent_mbps": d56["blast"]["sent_mbps"],
        "forged_sent_mbps": phases["forged"]["blast"]["sent_mbps"],
        "keeps_pct_dscp56": round(100 * d56["ps_mbps"] / only, 1) if only else None,
        "keeps_pct_forged": round(100 * phases["forged"]["ps_mbps"] / only, 1) if only else None,
        "seconds": seconds,
    }
    (out / "spoofing.json").write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mininet_tests.experiment_spoofing",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="per phase (default 8)")
    ap.add_argument("--json", default=None, help="write the result here too")
    ap.add_argument("--out", default=None, help="run directory (controller log)")
    args = ap.parse_args(argv)
    if not 2 <= args.seconds <= 60:
        ap.error("--seconds must be 2..60")
    result = run(args.seconds, Path(args.out) if args.out else None)
    text = json.dumps(result, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
