"""Topology descriptions: built-ins, graph facts, and clear errors for bad files."""

import pytest
import yaml

from sluice_common.errors import InputError
from topologies import builtin_names, load_topology, parse_topology


def test_builtins_load_and_connect():
    assert {"single-rack", "two-rack", "leaf-spine", "fat-tree", "cluster-2k"} <= set(builtin_names())
    two = load_topology("two-rack")
    assert [len(two.hosts_by_rack[r.name]) for r in two.racks] == [2, 2]
    assert two.total_gpus == 16
    assert two.oversubscription() == {"rack1": 4.0, "rack2": 4.0}
    # Cross-rack paths are limited by the 5 Gbit/s uplink, same-rack paths by host links.
    assert two.path_bandwidth("h1", "h3") == 5000
    assert two.path_bandwidth("h1", "h2") == 10000
    assert two.path("h1", "h3") == ["h1", "tor1", "spine1", "tor2", "h3"]


def test_fat_tree_shape_and_domains():
    ft = load_topology("fat-tree")
    roles = [s.role for s in ft.switches]
    assert (roles.count("core"), roles.count("agg"), roles.count("tor")) == (4, 8, 8)
    assert len(ft.hosts) == 16
    assert ft.domain_of("h1") == "pod1" and ft.domain_of("h16") == "pod4"
    assert len({s.dpid for s in ft.switches}) == len(ft.switches)


def test_cluster_2k_size_and_params():
    assert load_topology("cluster-2k").total_gpus == 2048
    ls = load_topology("leaf-spine:leaves=3,spines=2,hosts_per_leaf=1")
    assert len(ls.hosts) == 3 and len(ls.links) == 6


@pytest.mark.parametrize("name, ratio, spines", [("cluster-2k", 1.0, 8),
                                                 ("cluster-2k-2to1", 2.0, 4),
                                                 ("cluster-2k-4to1", 4.0, 2)])
def test_cluster_2k_fabrics_differ_only_in_their_uplinks(name, ratio, spines):
    base, topo = load_topology("cluster-2k"), load_topology(name)
    assert name in builtin_names() and topo.name == name
    assert topo.hosts == base.hosts and topo.racks == base.racks
    assert set(topo.oversubscription().values()) == {ratio}
    assert sum(1 for s in topo.switches if s.role == "spine") == spines
    assert {link.bw for link in topo.links} == {10000}


def test_two_rack_64_holds_the_tiresias_trace_on_two_racks():
    topo = load_topology("two-rack-64")
    assert "two-rack-64" in builtin_names()
    assert topo.total_gpus == 64 and len(topo.racks) == 2
    assert [len(topo.hosts_by_rack[r.name]) for r in topo.racks] == [8, 8]
    assert {h.gpus for h in topo.hosts} == {4} and {h.bw for h in topo.hosts} == {10000}
    assert topo.oversubscription() == {"rack1": 4.0, "rack2": 4.0}
    assert topo.path_bandwidth("h1", "h9") == 10000


BASE = {
    "name": "t",
    "switches": [{"name": "tor1", "role": "tor"}, {"name": "sp", "role": "spine"}],
    "racks": [{"name": "r1", "tor": "tor1"}],
    "hosts": [{"name": "h1", "rack": "r1", "gpus": 4, "bw": 100}],
    "links": [{"a": "tor1", "b": "sp", "bw": 100}],
}


@pytest.mark.parametrize("mutate, expect", [
    (lambda d: d["links"].append({"a": "tor1", "b": "nowhere", "bw": 10}), "nowhere"),
    (lambda d: d["hosts"][0].pop("rack"), "field 'rack': missing"),
    (lambda d: d["hosts"][0].update(bw=0), "field 'bw'"),
    (lambda d: d["links"][0].update(bw=-5), "field 'bw'"),
    (lambda d: d["hosts"][0].update(rack="r9"), "r9"),
    (lambda d: d["hosts"][0].update(colour="red"), "field 'colour'"),
    (lambda d: d["hosts"].append(dict(d["hosts"][0])), "duplicate"),
    (lambda d: d["switches"].append({"name": "lonely", "role": "spine"}), "not connected"),
])
def test_bad_descriptions_name_the_element(mutate, expect):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    mutate(data)
    with pytest.raises(InputError) as err:
        parse_topology(data, "bad.yaml")
    assert "bad.yaml" in str(err.value) and expect in str(err.value)


def test_unknown_builtin_is_an_input_error():
    with pytest.raises(InputError, match="no such topology"):
        load_topology("no-such-topology")


def test_host_intra_bw_has_a_documented_default_and_can_be_set():
    from topologies.model import DEFAULT_INTRA_BW_MBPS
    assert DEFAULT_INTRA_BW_MBPS == 100_000.0
    t = load_topology("two-rack")
    assert all(h.intra_bw == DEFAULT_INTRA_BW_MBPS for h in t.hosts)
    data = t.to_dict()
    data["hosts"][0]["intra_bw"] = 400_000
    t2 = parse_topology(data, "x.yaml")
    assert t2.host_by_name["h1"].intra_bw == 400_000 and t2.host_by_name["h2"].intra_bw == 100_000
    data["hosts"][0]["intra_bw"] = 0
    with pytest.raises(InputError) as err:
        parse_topology(data, "x.yaml")
    assert "intra_bw" in str(err.value) and "x.yaml" in str(err.value)
