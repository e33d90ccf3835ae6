"""topologies.generators: a leaf-spine's oversubscription sets its spine count."""

import pytest

from sluice_common.errors import InputError
from topologies import load_topology
from topologies.generators import leaf_spine, spines_for


def spines_of(data):
    return [s["name"] for s in data["switches"] if s["role"] == "spine"]


def test_the_ratio_is_made_by_fewer_spines_at_the_same_link_speed():
    one = leaf_spine(hosts_per_leaf=8, spines=8)
    two = leaf_spine(hosts_per_leaf=8, oversubscription=2)
    four = leaf_spine(hosts_per_leaf=8, oversubscription=4)
    assert [len(spines_of(d)) for d in (one, two, four)] == [8, 4, 2]
    assert {link["bw"] for d in (one, two, four) for link in d["links"]} == {10000}
    assert [h["name"] for h in two["hosts"]] == [h["name"] for h in one["hosts"]]


def test_spines_for_divides_the_racks_host_bandwidth_by_the_ratio():
    assert spines_for(8, 10000, 10000, 1) == 8
    assert spines_for(8, 10000, 10000, 2.0) == 4
    assert spines_for(4, 10000, 40000, 0.25) == 4
    with pytest.raises(ValueError, match="needs 2.66667 spines"):
        spines_for(8, 10000, 10000, 3)
    with pytest.raises(ValueError, match="needs 0.5 spines"):
        spines_for(8, 10000, 10000, 16)
    with pytest.raises(ValueError, match="must be > 0"):
        spines_for(8, 10000, 10000, 0)


def test_spines_default_to_two_and_must_agree_with_a_ratio_given_with_them():
    assert len(spines_of(leaf_spine())) == 2
    assert len(spines_of(leaf_spine(spines=1, oversubscription=2))) == 1   # 2 hosts x 10G / 10G
    with pytest.raises(ValueError, match="disagree"):
        leaf_spine(spines=2, oversubscription=2)


def test_a_spec_parameter_replaces_the_built_ins_default_of_the_other():
    assert load_topology("cluster-2k:oversubscription=4").oversubscription()["rack1"] == 4.0
    assert load_topology("cluster-2k-2to1:spines=8").oversubscription()["rack1"] == 1.0
    with pytest.raises(InputError, match="oversubscription=3 needs"):
        load_topology("cluster-2k:oversubscription=3")
    with pytest.raises(InputError, match="disagree"):
        load_topology("leaf-spine:spines=3,oversubscription=2")
