"""The baselines' tc lines (mininet_fabric/baselines.py), without I/O: mode names, the
shallow limit, the fair tree's classes, hash table and filters."""

from __future__ import annotations

import re

import pytest

from sluice_common.rank_rules import names as rule_names
from mininet_fabric import baselines, priority
from topologies import priority_classes as pc


def test_split_mode():
    assert baselines.split_mode("off", rule_names()) == (None, "off")
    assert baselines.split_mode("off-fair", rule_names()) == (None, "off-fair")
    assert baselines.split_mode("remaining", rule_names()) == ("remaining", "off")
    assert baselines.split_mode("progress+off-shallow", rule_names()) == ("progress", "off-shallow")
    for bad in ("fair", "remaining+fair", "nope+off", "off+remaining", ""):
        with pytest.raises(ValueError, match="mode must be"):
            baselines.split_mode(bad, rule_names())


def test_shallow_limit_is_twice_the_bdp_but_at_least_a_burst():
    burst = baselines.burst_packets()
    assert burst == 11                                   # 15k / 1514 B, rounded up
    assert baselines.shallow_limit_packets(12, 0.001) == burst
    # 100 Mbit/s x 10 ms = 125 kB; twice that in 1514-byte packets
    assert baselines.shallow_limit_packets(100, 0.010) == 166
    with pytest.raises(ValueError):
        baselines.shallow_limit_packets(0, 0.01)


def test_deep_and_shallow_trees_differ_only_in_the_leaf_limit():
    deep = baselines.egress_tree("off", "s1-eth1", 12)
    assert deep == priority.priority_tree("s1-eth1", 12)
    shallow = baselines.egress_tree("off-shallow", "s1-eth1", 12, rtt_s=0.02)
    limit = baselines.shallow_limit_packets(12, 0.02)
    assert limit == 40
    assert [l.replace(f"limit {limit}", "limit 200") for l in shallow] == deep
    assert sum(f"pfifo limit {limit}" in l for l in shallow) == pc.LEVELS
    with pytest.raises(ValueError):
        baselines.egress_tree("red", "s1-eth1", 12)
    with pytest.raises(ValueError):
        priority.priority_tree("s1-eth1", 12, leaf_limit=0)


def test_fair_tree_structure():
    lines = baselines.fair_tree("s1-eth1", 12, levels=8, buckets=64)
    text = "\n".join(lines)
    # root default: a leaf (the least urgent level's bucket 0), never an inner class
    assert lines[0] == "qdisc add dev s1-eth1 root handle 1: htb default 1700"
    classes = [l for l in lines if l.startswith("class add")]
    assert len(classes) == 1 + 8 + 8 * 64
    leaves = re.findall(r"classid 1:(1[0-7][0-9a-f]{2}) htb rate (\d+)kbit ceil 12000kbit "
                        r"burst 15k cburst 15k prio (\d)", text)
    assert len(leaves) == 8 * 64
    # a bucket's HTB priority is its level's (strict priority between levels holds)
    assert all(int(minor, 16) // 0x100 - 0x10 == int(prio) for minor, _, prio in leaves)
    # the buckets' guarantees together stay within the level's
    assert sum(int(rate) for _, rate, _ in leaves) <= 8 * priority.MIN_GUARANTEED_KBIT
    # each bucket as deep as Linux fq's per-flow limit (a short one dropped all the time)
    assert sum(f"pfifo limit {baselines.FAIR_BUCKET_PACKETS}" in l for l in lines) == 8 * 64
    assert sum("pfifo limit 11" in l for l in baselines.fair_tree("s1-eth1", 12, bucket_limit=11)
               ) == 8 * 64
    for level in range(8):
        cid, ht = pc.htb_classid(level), f"{0x100 + level:x}"
        assert (f"filter add dev s1-eth1 parent 1: protocol ip prio 1 u32 match ip tos "
                f"{pc.tos_of_level(level):#04x} 0xfc flowid {cid}") in lines
        assert f"filter add dev s1-eth1 parent {cid} protocol ip prio 1 handle {ht}: u32 divisor 64" in lines
        assert (f"filter add dev s1-eth1 parent {cid} protocol ip prio 1 u32 match u32 0 0 "
                f"hashkey mask 0x000001f8 at 20 link {ht}:") in lines
        entries = [l for l in lines if f"parent {cid} " in l and f" ht {ht}:" in l]
        assert len(entries) == 64
        assert any(f"parent {cid} protocol all prio 2" in l for l in lines)  # catch-all
    # the hash table is created before the filter that links to it
    assert lines.index(next(l for l in lines if "divisor" in l)) < \
        lines.index(next(l for l in lines if "hashkey" in l))


def test_fair_hash_separates_consecutive_jobs_ports():
    # ps-lite blocks of 40 ports: 13 consecutive jobs' servers land in distinct buckets
    assert len({baselines.fair_bucket(20001 + 40 * k) for k in range(13)}) == 13
    assert baselines.fair_bucket(5201) != baselines.fair_bucket(5209)
    assert baselines.fair_hash_mask(16) == 0x78
    for bad in (3, 1, 128):
        with pytest.raises(ValueError):
            baselines.fair_hash_mask(bad)
    fewer = baselines.fair_tree("x", 12, levels=2, buckets=4)
    assert sum(l.startswith("class add") for l in fewer) == 1 + 2 + 2 * 4
