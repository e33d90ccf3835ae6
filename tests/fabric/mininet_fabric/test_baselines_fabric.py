"""The heavy-tail experiment's baselines installed on a real fabric (Mininet, userspace
OVS, HTB, u32), each checked with two competing flows into one bottleneck, both unmarked
(least urgent level): a single TCP connection and an aggregate of 8 connections to one
port (one flow of the fair queue's hash, as a job's connections are).

- deep FIFO (``off``): TCP shares per connection, so the single one gets about 1/9; the
  queue's backlog grows far past the shallow limit.
- ``off-shallow``: the queue never holds more than its limit (backlog sampled), and the
  excess is dropped.
- ``off-fair``: the two flows land in different hash buckets and share the link about
  equally: the single connection gets about half.

Needs root and OVS (fabric marker; conftest fails loudly otherwise)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from dataclasses import replace
from functools import partial

import pytest

from mininet_fabric import baselines
from mininet_fabric.fabric import Fabric
from mininet_tests.priority_check import pick_contended_pair
from topologies import load_topology
from topologies import priority_classes as pc

pytestmark = pytest.mark.fabric

UPLINK_MBPS = 12.0                   # the heavy-tail experiment's shaped uplink
SINGLE_PORT, AGGREGATE_PORT = 5201, 5209     # different buckets of the fair tree
STREAMS = 8
RTT_S = 0.002
_BACKLOG_RE = re.compile(r"backlog \S+ (\d+)p")


def _leaf_backlog(intf: str) -> int:
    """Packets queued in the least urgent level's FIFO (the deep/shallow tree's leaf)."""
    handle = f"{pc.LEAST_URGENT + 10:x}:"
    out = subprocess.run(["tc", "-s", "qdisc", "show", "dev", intf], capture_output=True,
                         text=True).stdout
    for block in out.split("qdisc ")[1:]:
        if block.startswith(f"pfifo {handle}"):
            m = _BACKLOG_RE.search(block)
            return int(m.group(1)) if m else 0
    raise AssertionError(f"no leaf {handle} on {intf}:\n{out}")


def compete(fab, pair, seconds: int = 8, sample=None) -> tuple[float, float]:
    """Two TCP flows into pair.dst, unmarked, started together on an idle link: from
    low_src an aggregate of ``STREAMS`` connections to one port (one "flow" of the hash),
    from high_src a single connection to another port. Returns receiver Mbit/s (single,
    aggregate). ``sample()`` is called every 0.1 s while they run."""
    dst = fab.ip(pair.dst)
    for src in (pair.high_src, pair.low_src):   # ARP before the queue fills
        assert " 0% packet loss" in fab.cmd(src, f"ping -c1 -W2 {dst}")
    for port in (SINGLE_PORT, AGGREGATE_PORT):
        fab.popen(pair.dst, "iperf3", "-s", "-1", "-p", str(port))
    time.sleep(0.5)
    procs = [fab.popen(src, "iperf3", "-c", dst, "-p", str(port), "-P", str(n), "-t",
                       str(seconds), "-O", "2", "-J", stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
             for src, port, n in ((pair.high_src, SINGLE_PORT, 1),
                                  (pair.low_src, AGGREGATE_PORT, STREAMS))]
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            sample()
            time.sleep(0.1)

    thread = threading.Thread(target=sampler, daemon=True) if sample else None
    if thread:
        thread.start()
    rates = []
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 30)
        data = json.loads(out)
        assert "error" not in data, data.get("error")
        rates.append(data["end"]["sum_received"]["bits_per_second"] / 1e6)
    stop.set()
    if thread:
        thread.join(5)
    return rates[0], rates[1]


@pytest.fixture(scope="module")
def fab():
    two_rack = load_topology("two-rack")
    uplink = next(l for l in two_rack.links if {l.a, l.b} == {"tor1", "spine1"})
    topology = replace(two_rack, emulation_bw_scale=UPLINK_MBPS / uplink.bw)
    with Fabric(topology, progress=False) as fabric:
        yield fabric


def test_each_baseline_behaves_as_claimed(fab):
    pair = pick_contended_pair(fab.topology)
    port = fab.intf(pair.switch, pair.towards)
    assert pair.bw_mbit == pytest.approx(UPLINK_MBPS)
    limit = baselines.shallow_limit_packets(UPLINK_MBPS, RTT_S)
    figures = {}

    # deep FIFO: per-connection sharing; the queue fills far past the shallow limit
    fab.install_priority_tree(partial(baselines.egress_tree, "off"))
    deep = []
    figures["off"] = compete(fab, pair, sample=lambda: deep.append(_leaf_backlog(port)))

    # shallow FIFO: the backlog never exceeds the limit, the excess is dropped
    fab.install_priority_tree(partial(baselines.egress_tree, "off-shallow", rtt_s=RTT_S))
    shown = subprocess.run(["tc", "qdisc", "show", "dev", port], capture_output=True,
                           text=True).stdout
    assert shown.count(f"limit {limit}p") == pc.LEVELS, shown
    drops_before = fab.class_stats(port)[pc.htb_classid(pc.LEAST_URGENT)]["dropped"]
    shallow = []
    figures["off-shallow"] = compete(fab, pair, sample=lambda: shallow.append(_leaf_backlog(port)))
    drops = fab.class_stats(port)[pc.htb_classid(pc.LEAST_URGENT)]["dropped"] - drops_before

    # fair queueing: each flow its own bucket, the link shared about equally
    fab.install_priority_tree(partial(baselines.egress_tree, "off-fair"))
    before = fab.class_stats(port)
    figures["off-fair"] = compete(fab, pair)
    after = fab.class_stats(port)
    grown = {c for c in after if after[c]["bytes"] - before.get(c, {}).get("bytes", 0) > 1_000_000}
    print(f"\n(single, aggregate of {STREAMS}) Mbit/s: {figures}; deep backlog max {max(deep)}, "
          f"shallow max {max(shallow)} (limit {limit}), shallow drops {drops}; busy classes {grown}")

    assert max(deep) > 2 * limit, deep
    assert max(shallow) <= limit and drops > 0, (shallow, drops)
    buckets = {f"1:{baselines._bucket_minor(pc.LEAST_URGENT, baselines.fair_bucket(p)):x}"
               for p in (SINGLE_PORT, AGGREGATE_PORT)}
    assert len(buckets) == 2 and buckets <= grown, (buckets, grown)
    single, aggregate = figures["off-fair"]
    assert 0.7 <= single / aggregate <= 1.4, figures        # about equal shares
    assert single + aggregate >= 0.8 * UPLINK_MBPS, figures  # and the link stays full
    assert figures["off"][0] < 0.5 * figures["off"][1], figures   # FIFO: per connection
    assert not fab.priority_tree_intact()
