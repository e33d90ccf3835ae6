"""Does the fabric enforce priority? Two iperf3 TCP flows meet at one egress port; one
carries the most urgent DSCP class, the other the least urgent. We report each flow's
throughput and high/low.

Marking: the senders set the IP TOS byte themselves (iperf3 ``-S``), which is all a
standalone fabric has. Under a controller the same marks travel unless the controller
rewrites DSCP (which is its job for PS flows it knows about).

Where they meet is picked from the description (:func:`pick_contended_pair`): the
lowest-bandwidth link both paths share, so it is the real bottleneck (on two-rack:
h1->h3 and h2->h3 meet first on tor1's 50 Mbit/s uplink). The HTB class counters of that
port are reported too, as proof of which class each flow actually went through.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from itertools import permutations

from mininet_fabric.lock import FabricError
from topologies import Topology
from topologies import priority_classes as pc

IPERF_PORTS = (5201, 5202)


@dataclass(frozen=True)
class ContendedPair:
    high_src: str
    low_src: str
    dst: str
    switch: str       # the bottleneck port is on this switch...
    towards: str      # ...facing this neighbour
    bw_mbit: float    # emulated rate of that port


def _directed_edges(path: list[str]) -> list[tuple[str, str]]:
    return list(zip(path, path[1:]))


def pick_contended_pair(topology: Topology) -> ContendedPair:
    """Two sources and one destination whose shortest paths share their bottleneck link.

    Preference: the smallest shared bottleneck bandwidth; among equals, the last hop into
    the destination (every route to the destination must take it, so the pick stays right
    even when a controller spreads paths over a multipath fabric); then description order
    of the sources and destination; then the first such link along the path."""
    hosts = [h.name for h in topology.hosts]
    if len(hosts) < 3:
        raise FabricError(f"the priority check needs >= 3 hosts; {topology.name} has {len(hosts)}")
    g = topology.graph
    best = None
    for dst in hosts:
        for a, b in permutations([h for h in hosts if h != dst], 2):
            pa, pb = topology.path(a, dst), topology.path(b, dst)
            shared = set(_directed_edges(pa)) & set(_directed_edges(pb))
            bottleneck = min(topology.path_bandwidth(a, dst), topology.path_bandwidth(b, dst))
            for u, v in shared:
                bw = g.edges[u, v]["bw"]
                if bw > bottleneck:
                    continue
                # The first bottleneck along the path is where the queue builds (a later
                # link of the same rate only sees traffic already shaped to its rate).
                key = (bw, 0 if v == dst else 1, hosts.index(a), hosts.index(b),
                       hosts.index(dst), pa.index(u))
                if best is None or key < best[0]:
                    best = (key, ContendedPair(a, b, dst, u, v, bw * topology.emulation_bw_scale))
    if best is None:
        raise FabricError(f"no two flows of {topology.name} share a bottleneck link")
    return best[1]


def receiver_mbps(iperf_json: str) -> float:
    """Receiver-side throughput (Mbit/s) from ``iperf3 -J`` client output."""
    try:
        data = json.loads(iperf_json)
    except json.JSONDecodeError as err:
        raise FabricError(f"iperf3 gave no JSON ({err}): {iperf_json[-300:]!r}")
    if "error" in data:
        raise FabricError(f"iperf3 failed: {data['error']}")
    return data["end"]["sum_received"]["bits_per_second"] / 1e6


def run_flows(fabric, flows: list[tuple[str, str, int]], seconds: float) -> list[float]:
    """Run concurrent iperf3 TCP flows ``(src, dst, tos)``; receiver Mbit/s of each.

    The first second is omitted from the figures (-O 1) so slow start does not count."""
    servers = []
    for i, (_, dst, _) in enumerate(flows):
        port = IPERF_PORTS[0] + i
        servers.append(fabric.popen(dst, "iperf3", "-s", "-1", "-p", str(port)))
    _wait_listening(fabric, [(dst, IPERF_PORTS[0] + i) for i, (_, dst, _) in enumerate(flows)])
    clients = []
    for i, (src, dst, tos) in enumerate(flows):
        clients.append(fabric.popen(src, "iperf3", "-c", fabric.ip(dst), "-p",
                                    str(IPERF_PORTS[0] + i), "-t", str(int(seconds) + 1), "-O", "1",
                                    "-S", str(tos), "-J"))
    results = []
    for proc in clients:
        out, _ = proc.communicate(timeout=seconds + 30)
        results.append(receiver_mbps(out.decode() if isinstance(out, bytes) else out))
    for s in servers:
        try:
            s.wait(timeout=5)
        except Exception:
            s.kill()
    return results


def _wait_listening(fabric, endpoints: list[tuple[str, int]], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    for host, port in endpoints:
        while f":{port} " not in fabric.cmd(host, f"ss -Hltn sport = :{port}"):
            if time.monotonic() > deadline:
                raise FabricError(f"iperf3 server on {host}:{port} did not start")
            time.sleep(0.1)


def single_flow(fabric, src: str, dst: str, seconds: float = 8) -> dict:
    """One TCP flow alone: measured vs nominal (emulated bottleneck) Mbit/s."""
    nominal = fabric.topology.path_bandwidth(src, dst) * fabric.topology.emulation_bw_scale
    mbps = run_flows(fabric, [(src, dst, 0)], seconds)[0]
    return {"flow": f"{src}->{dst}", "mbps": round(mbps, 2), "nominal_mbps": nominal,
            "efficiency": round(mbps / nominal, 3)}


def priority_check(fabric, seconds: float = 8, high_level: int = pc.MOST_URGENT,
                   low_level: int = pc.LEAST_URGENT) -> dict:
    """Two flows into one bottleneck, most vs least urgent class. Returns the figures."""
    pair = pick_contended_pair(fabric.topology)
    port = fabric.intf(pair.switch, pair.towards)
    before = fabric.class_stats(port)
    high, low = run_flows(fabric, [(pair.high_src, pair.dst, pc.tos_of_level(high_level)),
                                   (pair.low_src, pair.dst, pc.tos_of_level(low_level))], seconds)
    after = fabric.class_stats(port)

    def sent(level: int) -> int:
        cid = pc.htb_classid(level)
        return after.get(cid, {}).get("bytes", 0) - before.get(cid, {}).get("bytes", 0)

    return {
        "high_flow": f"{pair.high_src}->{pair.dst}", "low_flow": f"{pair.low_src}->{pair.dst}",
        "high_level": high_level, "low_level": low_level,
        "high_dscp": pc.dscp_of_level(high_level), "low_dscp": pc.dscp_of_level(low_level),
        "bottleneck": port, "bottleneck_mbit": pair.bw_mbit,
        "high_mbps": round(high, 2), "low_mbps": round(low, 2),
        "priority_ratio": round(high / low, 2) if low > 0 else float("inf"),
        "class_bytes": {"high": sent(high_level), "low": sent(low_level)},
        "seconds": seconds,
    }
