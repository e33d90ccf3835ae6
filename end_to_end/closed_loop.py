"""The closed loop: the controller's measured link usage -> the bandwidth the scheduler's
Comm(n) may count on. Pure functions, no I/O.

The controller (``GET /links``) reports, per switch port, the bytes per second it sent
(tx) and received (rx) and the neighbour on the other end (a switch or a host). A port
on switch A facing neighbour B measures the link A<->B in both directions; a link is
full duplex, so its usage is the busier direction. Rates are those of the EMULATED
fabric (Mininet runs every link at ``bw * topology.emulation_bw_scale`` Mbit/s); the
scheduler thinks in the description's units, so the usage is divided by the scale.

``average_usage`` smooths bursty PS traffic over a few samples. ``available_topology`` returns a copy of the topology whose link ``bw`` is what is left:
nominal minus measured use, floored at ``floor`` x nominal (a saturated link still moves
data; TCP shares it with a newcomer, so the newcomer's bandwidth is not zero), which is
what ``estimator.effective_bandwidth`` then splits among the new job's flows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from topologies import Topology

DEFAULT_FLOOR = 0.1      # keep at least 10% of a link's nominal bandwidth


def link_key(a: str, b: str) -> tuple[str, str]:
    """One name per undirected link (sorted endpoints)."""
    return (a, b) if a <= b else (b, a)


def nominal_links(topology: Topology) -> dict[tuple[str, str], float]:
    """Every link (switch links and host<->ToR links) -> nominal Mbit/s (description)."""
    return {link_key(l.a, l.b): float(l.bw) for l in topology.all_links()}


def measured_usage(topology: Topology, ports: Iterable[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """Controller port entries (``links()["ports"]``) -> link -> used Mbit/s, in the
    description's scale. Ports whose neighbour is unknown, or that are not a link of the
    topology, are ignored; a link seen from both ends keeps the larger figure."""
    known = nominal_links(topology)
    scale = topology.emulation_bw_scale or 1.0
    used: dict[tuple[str, str], float] = {}
    for port in ports:
        switch, peer = port.get("switch"), port.get("peer")
        if not switch or not peer:
            continue
        key = link_key(str(switch), str(peer))
        if key not in known:
            continue
        bytes_per_s = max(float(port.get("tx_bytes_per_s") or 0.0),
                          float(port.get("rx_bytes_per_s") or 0.0))
        mbit = bytes_per_s * 8 / 1e6 / scale
        used[key] = max(used.get(key, 0.0), mbit)
    return used


def average_usage(samples: Iterable[dict[tuple[str, str], float]]) -> dict[tuple[str, str], float]:
    """Mean usage per link over several samples (a link missing from a sample was idle).
    PS traffic comes in bursts (push, pull, then compute): one 1-s sample can catch a
    burst or a gap, so the scheduler averages the last few."""
    samples = list(samples)
    keys = {k for s in samples for k in s}
    return {k: sum(s.get(k, 0.0) for s in samples) / len(samples) for k in keys}


def available_bandwidth(topology: Topology, used: dict[tuple[str, str], float],
                        floor: float = DEFAULT_FLOOR) -> dict[tuple[str, str], float]:
    """link -> Mbit/s still available (description scale), never below floor x nominal."""
    if not 0 < floor <= 1:
        raise ValueError(f"floor must be in (0, 1], got {floor}")
    return {key: max(bw - used.get(key, 0.0), floor * bw)
            for key, bw in nominal_links(topology).items()}


def available_topology(topology: Topology, used: dict[tuple[str, str], float]) -> Topology:
    """A copy of ``topology`` whose host and switch links carry the available bandwidth
    (names, racks, IPs and GPUs unchanged), for ``effective_bandwidth``."""
    avail = available_bandwidth(topology, used)
    hosts = tuple(replace(h, bw=avail[link_key(h.name, topology.rack_by_name[h.rack].tor)])
                  for h in topology.hosts)
    links = tuple(replace(l, bw=avail[link_key(l.a, l.b)]) for l in topology.links)
    return replace(topology, hosts=hosts, links=links)


def utilisation(topology: Topology, used: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """link -> used / nominal (0..1, can exceed 1 slightly from counter jitter)."""
    nominal = nominal_links(topology)
    return {key: used.get(key, 0.0) / bw for key, bw in nominal.items()}


def switch_links(topology: Topology) -> list[tuple[str, str]]:
    """The switch<->switch links (uplinks): where rack oversubscription bites."""
    return [link_key(l.a, l.b) for l in topology.links]
