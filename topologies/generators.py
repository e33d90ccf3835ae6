"""Parameterised topologies, built as plain YAML-shaped dicts and parsed by the same
validator as a user's file, so a generated topology is exactly what its YAML would be."""

from __future__ import annotations

from typing import Any


def leaf_spine(leaves: int = 4, spines: int | None = None, hosts_per_leaf: int = 2,
               gpus: int = 4, host_bw: float = 10000, uplink_bw: float = 10000,
               racks_per_domain: int = 0, name: str | None = None, bw_scale: float = 0.01,
               oversubscription: float | None = None) -> dict[str, Any]:
    """Every leaf (ToR) links to every spine. ``racks_per_domain`` > 0 groups racks into
    Liquid domains (pods); 0 puts the whole cluster in one domain.

    ``spines`` (default 2) or ``oversubscription`` sets the spine count: the latter is the
    rack's host bandwidth over its uplink bandwidth (``oversubscription=2``: 2:1) and gives
    :func:`spines_for` spines. The ratio is made by the number of uplinks, not their
    speed: the simulator pools a rack's uplinks (their sum is the rack's uplink capacity,
    ``job_scheduler.core.priority_pricing.uplink_capacities``) but routes one job's flows
    on one shortest path (``job_scheduler.core.estimator.effective_bandwidth``), so slower
    links would cut a job's bandwidth on the fabric alone as well as the pool; fewer links
    cut the pool only, which is where an oversubscribed fabric differs."""
    if oversubscription is not None:
        needed = spines_for(hosts_per_leaf, host_bw, uplink_bw, oversubscription)
        if spines is not None and spines != needed:
            raise ValueError(f"spines={spines} and oversubscription={oversubscription} "
                             f"disagree ({needed} spine(s) make it {oversubscription}:1); "
                             "give one of them")
        spines = needed
    spines = 2 if spines is None else spines
    switches = [{"name": f"tor{i}", "role": "tor"} for i in range(1, leaves + 1)]
    switches += [{"name": f"spine{j}", "role": "spine"} for j in range(1, spines + 1)]
    racks, hosts = [], []
    for i in range(1, leaves + 1):
        rack = {"name": f"rack{i}", "tor": f"tor{i}"}
        if racks_per_domain:
            rack["domain"] = f"pod{(i - 1) // racks_per_domain + 1}"
        racks.append(rack)
        for k in range(hosts_per_leaf):
            hosts.append({"name": f"h{(i - 1) * hosts_per_leaf + k + 1}", "rack": f"rack{i}",
                          "gpus": gpus, "bw": host_bw})
    links = [{"a": f"tor{i}", "b": f"spine{j}", "bw": uplink_bw}
             for i in range(1, leaves + 1) for j in range(1, spines + 1)]
    return {"name": name or f"leaf-spine-{leaves}x{spines}x{hosts_per_leaf}",
            "emulation": {"bw_scale": bw_scale},
            "switches": switches, "racks": racks, "hosts": hosts, "links": links}


def spines_for(hosts_per_leaf: int, host_bw: float, uplink_bw: float,
               oversubscription: float) -> int:
    """The spine count that makes a leaf's ``hosts_per_leaf * host_bw`` of hosts
    ``oversubscription`` times its ``spines * uplink_bw`` of uplinks; a whole number >= 1."""
    if not oversubscription > 0:
        raise ValueError(f"oversubscription must be > 0, got {oversubscription}")
    exact = hosts_per_leaf * host_bw / (oversubscription * uplink_bw)
    count = round(exact)
    if count < 1 or abs(exact - count) > 1e-9 * max(exact, 1.0):
        raise ValueError(f"oversubscription={oversubscription} needs {exact:g} spines "
                         f"({hosts_per_leaf} hosts x {host_bw:g} Mbit/s over "
                         f"{oversubscription:g} x {uplink_bw:g} Mbit/s uplinks); "
                         "it must come to a whole number >= 1")
    return count


def fat_tree(k: int = 4, gpus: int = 4, bw: float = 10000, bw_scale: float = 0.01) -> dict[str, Any]:
    """The classic k-ary fat tree: k pods of k/2 edge (ToR) and k/2 aggregation switches,
    (k/2)^2 core switches, k/2 hosts per edge switch. Each pod is a Liquid domain."""
    if k < 2 or k % 2:
        raise ValueError("fat-tree k must be an even number >= 2")
    half = k // 2
    switches, racks, hosts, links = [], [], [], []
    cores = [f"core{c}" for c in range(1, half * half + 1)]
    switches += [{"name": c, "role": "core"} for c in cores]
    host_no = 0
    for p in range(1, k + 1):
        aggs = [f"agg{p}_{a}" for a in range(1, half + 1)]
        edges = [f"edge{p}_{e}" for e in range(1, half + 1)]
        switches += [{"name": a, "role": "agg"} for a in aggs]
        switches += [{"name": e, "role": "tor"} for e in edges]
        for ai, agg in enumerate(aggs):
            links += [{"a": agg, "b": e, "bw": bw} for e in edges]
            links += [{"a": agg, "b": cores[ai * half + c], "bw": bw} for c in range(half)]
        for e in edges:
            rack = f"rack{p}_{e.split('_')[1]}"
            racks.append({"name": rack, "tor": e, "domain": f"pod{p}"})
            for _ in range(half):
                host_no += 1
                hosts.append({"name": f"h{host_no}", "rack": rack, "gpus": gpus, "bw": bw})
    return {"name": f"fat-tree-k{k}", "emulation": {"bw_scale": bw_scale},
            "switches": switches, "racks": racks, "hosts": hosts, "links": links}
