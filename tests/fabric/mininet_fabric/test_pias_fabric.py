"""PIAS's host tagging on a real fabric (Mininet, userspace OVS, the sluice controller
over OpenFlow, HTB + u32 at the switch egresses, iptables in each host's namespace): a
connection's packets travel in the most urgent level until it has sent ``A`` bytes and
in the next level after (counted per level class at the rack uplink's egress), its ACKs
stay urgent on the way back, the switches keep the hosts' marking only when the
controller trusts it, and no rule is left behind, in the hosts or in the machine's own
namespace.

Needs root and OVS (fabric marker; conftest fails loudly otherwise)."""

from __future__ import annotations

import subprocess
import time
from functools import partial

import pytest

from end_to_end.run import environment
from mininet_fabric import baselines as bl
from mininet_fabric import pias
from mininet_tests.heavy_tail import host_tagging
from topologies import load_topology
from topologies import priority_classes as pc

pytestmark = pytest.mark.fabric

A, B = 300_000, 5_000_000       # demotion thresholds: level 0 below A, level 1 to B
SENT = 2_000_000                # one connection's bytes: crosses A, not B
PORT = 5301


def _root_mangle() -> str:
    return subprocess.run(["iptables-save", "-t", "mangle"], capture_output=True,
                          text=True).stdout


def _without_comments(text: str) -> list[str]:
    return [l for l in text.splitlines() if not l.startswith("#")]


def _class_bytes(fab, intf: str) -> dict[int, int]:
    stats = fab.class_stats(intf)
    return {lv: stats.get(pc.htb_classid(lv), {}).get("bytes", 0) for lv in range(pc.LEVELS)}


def _send(fab, src: str, dst: str) -> tuple[dict[int, int], dict[int, int]]:
    """One TCP connection of SENT bytes src -> dst (iperf3); bytes per level class at the
    data's rack-uplink egress and at the ACKs' (the opposite uplink)."""
    data_port, ack_port = fab.intf("tor1", "spine1"), fab.intf("tor2", "spine1")
    assert " 0% packet loss" in fab.cmd(src, f"ping -c1 -W2 {fab.ip(dst)}")
    server = fab.popen(dst, "iperf3", "-s", "-1", "-p", str(PORT))
    time.sleep(0.5)
    data0, ack0 = _class_bytes(fab, data_port), _class_bytes(fab, ack_port)
    out = fab.cmd(src, f"iperf3 -c {fab.ip(dst)} -p {PORT} -n {SENT} -J >/dev/null; echo rc=$?")
    assert "rc=0" in out, out
    server.wait(timeout=30)
    data1, ack1 = _class_bytes(fab, data_port), _class_bytes(fab, ack_port)
    return ({lv: data1[lv] - data0[lv] for lv in data1},
            {lv: ack1[lv] - ack0[lv] for lv in ack1})


@pytest.mark.parametrize("trust", [True, False], ids=["trusted", "re-marked"])
def test_a_connection_is_demoted_after_A_bytes_and_nothing_is_left_behind(tmp_path, trust):
    root_before = _without_comments(_root_mangle())
    args = ("--trust-host-dscp",) if trust else ()
    with environment(load_topology("two-rack"), "two-rack", tmp_path, controller_args=args,
                     progress=False) as (fab, _client):
        fab.install_priority_tree(partial(bl.egress_tree, "pias"))
        with host_tagging.tagging(fab, ("h1", "h3"), pias.tagging_rules((A, B))):
            assert host_tagging.present(fab, "h1") and host_tagging.present(fab, "h3")
            data, acks = _send(fab, "h1", "h3")
        assert not host_tagging.present(fab, "h1") and not host_tagging.present(fab, "h3")
    assert _without_comments(_root_mangle()) == root_before
    print(f"\ntrust={trust}: data egress bytes per level {data}; ACK egress {acks}")
    if trust:
        # level 0 carries the first A bytes (and iperf3's control connection: a few kB)
        assert 0.9 * A <= data[0] <= 1.2 * A + 20_000, data
        assert 0.9 * (SENT - A) <= data[1] <= 1.1 * SENT, data
        assert data[pc.LEAST_URGENT] < 20_000 and data[2] == 0, data
        # the ACK stream stays most urgent on its way back
        assert acks[0] > 10_000 and acks[0] > 5 * acks[pc.LEAST_URGENT], acks
    else:
        # the switches re-mark a host's DSCP to the least urgent class
        assert data[pc.LEAST_URGENT] >= 0.9 * SENT and data[0] == data[1] == 0, data
