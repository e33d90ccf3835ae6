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
from dataclasses import dataclass, replace
from itertools import permutations

from mininet_fabric.lock import FabricError
from topologies import Topology
from topologies import priority_classes as pc

IPERF_PORTS = (5201, 5202)
# The contended port's default ceiling (Mbit/s). Open vSwitch's software datapath forwards
# every packet of these veth ports on one core; on a slow host with two cores it carried about
# 90 Mbit/s through fat-tree's three switches at 93-98 % of that core, so a 100 Mbit/s
# egress never queued and strict priority decided only part of the split (ratios 0.6-18.7
# over six runs). Below the datapath's rate the queue builds at the shaped port, which is
# what the check is about. Two-rack's 50 Mbit/s uplink passed on every machine measured.
DEFAULT_BOTTLENECK_MBIT = 50.0


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


def capped_for_check(topology: Topology, max_mbit: float | None) -> Topology:
    """``topology`` with every emulated link scaled by one factor so that the check's
    contended port runs at no more than ``max_mbit`` (None or 0: unchanged). One factor for
    all links keeps the ratios, so the same pair and port are contended."""
    if not max_mbit:
        return topology
    bottleneck = pick_contended_pair(topology).bw_mbit
    if bottleneck <= max_mbit:
        return topology
    return replace(topology, emulation_bw_scale=topology.emulation_bw_scale * max_mbit / bottleneck)


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
    """Two flows into one bottleneck, most vs least urgent class, marked by the senders
    (standalone). Returns the figures."""
    pair = pick_contended_pair(fabric.topology)
    return _measure(fabric, pair, seconds, high_level, low_level,
                    (pc.tos_of_level(high_level), pc.tos_of_level(low_level)))


def _measure(fabric, pair: ContendedPair, seconds: float, high_level: int, low_level: int,
             tos: tuple[int, int]) -> dict:
    port = fabric.intf(pair.switch, pair.towards)
    before = fabric.class_stats(port)
    high, low = run_flows(fabric, [(pair.high_src, pair.dst, tos[0]),
                                   (pair.low_src, pair.dst, tos[1])], seconds)
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
        "seconds": seconds, "marked_by": "senders",
    }


# ---- through the controller: the two flows registered as two jobs -----------------------
# The check's job names (a stale pair left by a killed check is replaced), the ports its
# "workers" would take pulls on (no pull flow runs), and the sizes and progress that make
# every ranking rule put the high job first: remaining (1 batch of 1 byte left vs ~10^18
# bytes), progress (batch 0 vs 10^6) and attained (0 bytes vs 10^15: the last level).
CHECK_JOBS = ("fabric-check-high", "fabric-check-low")
CHECK_WORKER_PORTS = (5211, 5212)
LOW_TOTAL_BATCHES, LOW_BYTES_PER_BATCH, LOW_BATCH = 10 ** 9, 10 ** 9, 10 ** 6


def check_registrations(pair: ContendedPair, ip) -> list[tuple[dict, int]]:
    """The two job registrations (controller REST body) of the check's flows and the batch
    each reports, high job first: each "worker" pushes to its "server" on the iperf3
    port, so the controller classifies the iperf3 flow (and its ACKs) as that job's push.
    ``ip``: host name -> IPv4 address."""
    out = []
    for k, (job, src) in enumerate(((CHECK_JOBS[0], pair.high_src), (CHECK_JOBS[1], pair.low_src))):
        body = {"id": job, "servers": [{"id": "s0", "ip": ip(pair.dst), "port": IPERF_PORTS[k]}],
                "workers": [{"id": "w0", "ip": ip(src), "port": CHECK_WORKER_PORTS[k]}]}
        if k == 0:
            body |= {"total_batches": 1, "bytes_per_batch": 1}
        else:
            body |= {"total_batches": LOW_TOTAL_BATCHES, "bytes_per_batch": LOW_BYTES_PER_BATCH}
        out.append((body, 0 if k == 0 else LOW_BATCH))
    return out


def push_level(flows: dict, job: str) -> int:
    """The level the controller gave ``job``'s push flow (``GET /flows?job=`` answer)."""
    levels = [f["level"] for f in flows.get("flows", []) if f["job"] == job and f["kind"] == "push"]
    if not levels or levels[0] is None:
        raise FabricError(f"the controller reports no level for job {job}'s push flow: {flows}")
    return int(levels[0])


def controller_priority_check(fabric, client, seconds: float = 8) -> dict:
    """The priority check through the controller: the two flows are registered as two
    jobs (REST, admin token), the senders mark nothing (TOS 0), so the DSCP the
    bottleneck sees is the controller's classification and marking. The jobs are
    unregistered afterwards, also on failure."""
    from controller.client import ControllerError

    pair = pick_contended_pair(fabric.topology)
    regs = check_registrations(pair, fabric.ip)
    registered = []
    try:
        for body, batch in regs:
            try:
                client.remove_job(body["id"], wait=True)     # a killed check's leftover
            except ControllerError as err:
                if err.status != 404:
                    raise
            answer = client.register_job(body, wait=True)
            registered.append(body["id"])
            client.progress(body["id"], "w0", batch, answer["token"], wait=True)
        high_level = push_level(client.flows(CHECK_JOBS[0]), CHECK_JOBS[0])
        low_level = push_level(client.flows(CHECK_JOBS[1]), CHECK_JOBS[1])
        if high_level >= low_level:
            raise FabricError(f"the controller ranked the check's high job at level {high_level}, "
                              f"not above the low job's {low_level}")
        result = _measure(fabric, pair, seconds, high_level, low_level, (0, 0))
    except (ControllerError, OSError) as err:
        raise FabricError(f"registering the check's flows with the controller at "
                          f"{client.url}: {err}") from err
    finally:
        left = []
        for job in registered:
            try:
                client.remove_job(job, wait=True)
            except (ControllerError, OSError) as err:
                left.append(f"{job} ({err})")
    if left:
        raise FabricError(f"could not unregister the check's jobs: {', '.join(left)}")
    result["registered_jobs"] = list(CHECK_JOBS)
    result["marked_by"] = "controller"
    return result
