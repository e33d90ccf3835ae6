"""The routes (FabricView.next_ports) are computed once per switch a host sits behind,
not once per host: the table must be exactly the per-host computation's, whichever
switches are connected (a disconnected one is routed around where it can be)."""

import ipaddress

import networkx as nx
from hypothesis import given, settings, strategies as st

from bench.controller.scale_cluster import state_file
from controller.forwarding import AVOID_COST, FabricView
from topologies.generators import fat_tree, leaf_spine
from topologies.model import parse_topology


def per_host_next_ports(view: FabricView) -> dict[int, dict[str, int]]:
    """The reference: one Dijkstra per host, as the controller computed it before."""
    g = view.switch_graph()
    for a, b in g.edges:
        g.edges[a, b]["cost"] = AVOID_COST if (a not in view.connected or
                                              b not in view.connected) else 1
    port_to = {(a, b): pa for (a, pa), (b, _) in view.links.items()}
    out: dict[int, dict[str, int]] = {d: {} for d in g.nodes}
    for ip, loc in sorted(view.hosts.items()):
        if loc.dpid not in g:
            continue
        dist = nx.single_source_dijkstra_path_length(g, loc.dpid, weight="cost")
        salt = int(ipaddress.IPv4Address(ip))
        for s, d in dist.items():
            if s == loc.dpid:
                out[s][ip] = loc.port
                continue
            closer = sorted(n for n in g.neighbors(s)
                            if dist.get(n, -1) + g.edges[s, n]["cost"] == d)
            out[s][ip] = port_to[(s, closer[salt % len(closer)])]
    return out


def discovered(topo_dict: dict) -> FabricView:
    topo = parse_topology(topo_dict, "<test>")
    view = FabricView(topo)
    view.restore(state_file(topo, [], "remaining", 0.0)["fabric"])
    return view


@settings(max_examples=40, deadline=None)
@given(shape=st.sampled_from(["leaf-spine", "fat-tree"]), size=st.integers(2, 5),
       down=st.sets(st.integers(0, 40), max_size=6))
def test_next_ports_equal_the_per_host_computation(shape, size, down):
    topo = (leaf_spine(leaves=size, spines=2, hosts_per_leaf=3, gpus=1) if shape == "leaf-spine"
            else fat_tree(k=4, gpus=1))
    view = discovered(topo)
    dpids = sorted(view.name_of_dpid)
    view.connected.update(d for i, d in enumerate(dpids) if i not in down)
    assert view.next_ports() == per_host_next_ports(view)
    assert any(view.next_ports().values())
