"""Pure parts of the fabric: DSCP mapping, tc commands, Mininet Topo building, picking
the contended port, the lock, and bad CLI input. No root, no OVS; seconds. (The Mininet
Topo itself, which needs Debian's mininet: tests/fabric/topologies/test_mininet_topo.py.)"""

from __future__ import annotations

import multiprocessing
import time

import pytest
from hypothesis import given, strategies as st

from mininet_fabric import priority
from mininet_tests.cli import MIN_RATIO
from mininet_fabric.fabric import has_loops, parse_controller
from mininet_fabric.lock import FabricError, FabricLock
from mininet_tests.priority_check import capped_for_check, pick_contended_pair, receiver_mbps
from sluice.cli import main as sluice_main
from sluice_common.errors import InputError
from topologies import load_topology
from topologies import priority_classes as pc
from topologies.mininet_topo import check_emulatable, emulated_links, port_map


# ---- DSCP <-> level <-> HTB class -----------------------------------------------------

def test_level_zero_is_most_urgent_and_unmarked_is_least():
    assert pc.dscp_of_level(0) == 56 and pc.tos_of_level(0) == 0xE0
    assert pc.dscp_of_level(pc.LEAST_URGENT) == 0
    assert pc.level_of_dscp(0) == pc.LEAST_URGENT
    assert pc.htb_classid(0) == "1:1" and pc.htb_classid(7) == "1:8"
    assert [row["queue"] for row in pc.table()] == list(range(pc.LEVELS))


@given(st.integers(0, pc.LEVELS - 1))
def test_level_dscp_round_trip(level):
    assert pc.level_of_dscp(pc.dscp_of_level(level)) == level
    assert pc.tos_of_level(level) & 0x3 == 0           # ECN bits untouched
    assert pc.tos_of_level(level) >> 2 == pc.dscp_of_level(level)


@given(st.integers(0, 63))
def test_every_dscp_maps_to_some_level(dscp):
    assert 0 <= pc.level_of_dscp(dscp) < pc.LEVELS


def test_levels_map_to_distinct_dscp_classes():
    assert len({pc.dscp_of_level(l) for l in range(pc.LEVELS)}) == pc.LEVELS
    with pytest.raises(ValueError):
        pc.dscp_of_level(8)
    with pytest.raises(ValueError):
        pc.htb_classid(-1)


# ---- tc commands ---------------------------------------------------------------------

def test_priority_tree_has_one_class_and_filter_per_level():
    lines = priority.priority_tree("tor1-eth3", 50)
    assert lines[0] == "qdisc add dev tor1-eth3 root handle 1: htb default 8"
    classes = [l for l in lines if l.startswith("class add") and "parent 1:100" in l]
    filters = [l for l in lines if l.startswith("filter add")]
    assert len(classes) == len(filters) == 8
    for level in range(8):
        cls = classes[level]
        assert f"classid {pc.htb_classid(level)} " in cls and f"prio {level} " in cls
        assert "ceil 50000kbit" in cls and "rate 500kbit" in cls
        assert f"match ip tos {pc.tos_of_level(level):#04x} 0xfc flowid {pc.htb_classid(level)}" \
            in filters[level]
    assert "rate 50000kbit ceil 50000kbit" in lines[1]


def test_fewer_levels_keep_top_and_bottom():
    lines = priority.priority_tree("s1-eth1", 100, levels=3)
    flowids = [l.rsplit("flowid ", 1)[1] for l in lines if l.startswith("filter")]
    assert flowids == ["1:1", "1:2", "1:8"]
    with pytest.raises(ValueError):
        priority.priority_tree("s1-eth1", 100, levels=9)
    with pytest.raises(ValueError):
        priority.rate_limit("h1-eth0", 0)


def test_slow_links_keep_a_minimum_guarantee():
    lines = priority.priority_tree("s1-eth1", 2)
    assert all(f"rate {priority.MIN_GUARANTEED_KBIT}kbit ceil 2000kbit" in l
               for l in lines if "parent 1:100" in l)


def test_parse_class_stats():
    text = """class htb 1:1 parent 1:100 leaf a: prio 0 rate 500Kbit ceil 50Mbit burst 15Kb cburst 15Kb
 Sent 61924332 bytes 40901 pkt (dropped 3, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
class htb 1:100 root rate 50Mbit ceil 50Mbit burst 15Kb cburst 15Kb
 Sent 62632502 bytes 41369 pkt (dropped 0, overlimits 0 requeues 0)
"""
    stats = priority.parse_class_stats(text)
    assert stats["1:1"] == {"bytes": 61924332, "packets": 40901, "dropped": 3}
    assert stats["1:100"]["packets"] == 41369


# ---- Mininet Topo from the description -----------------------------------------------

def test_two_rack_ports_and_links():
    t = load_topology("two-rack")
    links = emulated_links(t)
    assert [(l.intf_a, l.intf_b, l.bw_mbit) for l in links] == [
        ("h1-eth0", "tor1-eth1", 100), ("h2-eth0", "tor1-eth2", 100),
        ("h3-eth0", "tor2-eth1", 100), ("h4-eth0", "tor2-eth2", 100),
        ("tor1-eth3", "spine1-eth1", 50), ("tor2-eth3", "spine1-eth2", 50)]
    assert port_map(t)["spine1"] == {"tor1": 1, "tor2": 2}


@pytest.mark.parametrize("name", ["two-rack", "leaf-spine", "fat-tree", "single-rack",
                                  "two-rack-64"])
def test_ports_unique_per_switch_and_every_link_present(name):
    t = load_topology(name)
    ports = port_map(t)
    for switch, by_neighbour in ports.items():
        assert sorted(by_neighbour.values()) == list(range(1, len(by_neighbour) + 1)), switch
    assert sum(len(v) for v in ports.values()) == 2 * len(t.links) + len(t.hosts)


def test_too_big_or_badly_named_topologies_are_refused():
    for name in ("cluster-2k", "cluster-2k-2to1", "cluster-2k-4to1"):
        with pytest.raises(InputError, match="too big to emulate"):
            check_emulatable(load_topology(name))
    check_emulatable(load_topology("two-rack-64"))
    from topologies import parse_topology
    t = parse_topology({"name": "long", "switches": [{"name": "a-very-long-switch"}],
                        "racks": [{"name": "r", "tor": "a-very-long-switch"}],
                        "hosts": [{"name": "h1", "rack": "r", "gpus": 1, "bw": 10}]})
    with pytest.raises(InputError, match="too long for a Linux interface"):
        check_emulatable(t)


def test_loops_detected():
    assert not has_loops(load_topology("two-rack"))
    assert has_loops(load_topology("fat-tree"))
    assert has_loops(load_topology("leaf-spine"))
    assert not has_loops(load_topology("leaf-spine:leaves=3,spines=1"))


# ---- the priority check's choice of flows ---------------------------------------------

def test_two_rack_flows_meet_on_the_uplink():
    pair = pick_contended_pair(load_topology("two-rack"))
    assert (pair.high_src, pair.low_src, pair.dst) == ("h1", "h2", "h3")
    assert (pair.switch, pair.towards, pair.bw_mbit) == ("tor1", "spine1", 50)


def test_equal_links_pick_the_last_hop():
    pair = pick_contended_pair(load_topology("fat-tree"))
    assert pair.towards == pair.dst


@pytest.mark.parametrize("name", ["fat-tree", "leaf-spine", "single-rack"])
def test_the_check_caps_its_contended_port_and_keeps_the_pair(name):
    topo = load_topology(name)
    capped = capped_for_check(topo, 50)
    assert pick_contended_pair(topo).bw_mbit == 100            # the description's own rate
    assert pick_contended_pair(capped).bw_mbit == pytest.approx(50)
    assert capped.emulation_bw_scale == pytest.approx(topo.emulation_bw_scale / 2)
    same = lambda p: (p.high_src, p.low_src, p.dst, p.switch, p.towards)  # noqa: E731
    assert same(pick_contended_pair(capped)) == same(pick_contended_pair(topo))


def test_the_cap_leaves_slower_ports_and_zero_alone():
    two_rack = load_topology("two-rack")                         # 50 Mbit/s uplink
    assert capped_for_check(two_rack, 50) is two_rack
    assert capped_for_check(two_rack, 20).emulation_bw_scale == pytest.approx(
        two_rack.emulation_bw_scale * 20 / 50)
    fat_tree = load_topology("fat-tree")
    assert capped_for_check(fat_tree, 0) is fat_tree


def test_receiver_mbps_parses_and_reports_errors():
    assert receiver_mbps('{"end": {"sum_received": {"bits_per_second": 4.5e7}}}') == 45.0
    with pytest.raises(FabricError, match="unable to connect"):
        receiver_mbps('{"error": "unable to connect to server"}')
    with pytest.raises(FabricError, match="no JSON"):
        receiver_mbps("")


# ---- the lock ------------------------------------------------------------------------

def _hold_lock(path, seconds, ready):
    with FabricLock("holder", path=path):
        ready.set()
        time.sleep(seconds)


def test_lock_blocks_another_process_then_lets_it_in(tmp_path):
    path = tmp_path / "fabric.lock"
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold_lock, args=(path, 1.5, ready))
    holder.start()
    try:
        assert ready.wait(10)
        with pytest.raises(FabricError, match="held by: pid"):
            FabricLock("me", timeout=0.3, path=path, poll_s=0.05).acquire()
        started = time.monotonic()
        with FabricLock("me", timeout=10, path=path, poll_s=0.05):   # waits for the holder
            assert time.monotonic() - started > 0.3
            with FabricLock("nested", timeout=0, path=path):          # re-entrant
                pass
    finally:
        holder.join(10)


# ---- controller argument and CLI bad input (nothing is built) --------------------------

@pytest.mark.parametrize("bad", ["6653", "localhost:6653", "127.0.0.1:0", "127.0.0.1:x", ":6653"])
def test_bad_controller_argument(bad):
    with pytest.raises(InputError):
        parse_controller(bad)
    assert parse_controller("127.0.0.1:6653") == ("127.0.0.1", 6653)


@pytest.mark.parametrize("argv, words", [
    (["fabric", "check", "--topology", "no-such"], "no such topology"),
    (["fabric", "check", "--topology", "fat-tree"], "has loops"),
    (["fabric", "check", "--controller", "1.2.3.4:99999"], "port"),
    (["fabric", "check", "--levels", "9"], "--levels"),
    (["fabric", "check", "--bottleneck-mbit", "-5"], "--bottleneck-mbit"),
    (["fabric", "up", "--topology", "cluster-2k"], "too big"),
])
def test_cli_bad_input_exits_2_with_a_reason(argv, words, capsys):
    assert sluice_main(argv) == 2
    assert words in capsys.readouterr().err
    assert MIN_RATIO == 5.0
