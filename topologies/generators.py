"""Parameterised topologies, built as plain YAML-shaped dicts and parsed by the same
validator as a user's file, so a generated topology is exactly what its YAML would be."""

from __future__ import annotations

from typing import Any


def leaf_spine(leaves: int = 4, spines: int = 2, hosts_per_leaf: int = 2, gpus: int = 4,
               host_bw: float = 10000, uplink_bw: float = 10000, racks_per_domain: int = 0,
               name: str | None = None, bw_scale: float = 0.01) -> dict[str, Any]:
    """Every leaf (ToR) links to every spine. ``racks_per_domain`` > 0 groups racks into
    Liquid domains (pods); 0 puts the whole cluster in one domain."""
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
