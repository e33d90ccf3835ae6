"""The Mininet/OVS fabric harness against real Open vSwitch, Mininet and iperf3.

Needs root (see tests/conftest.py: fails loudly otherwise). About 1.5 minutes in all.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from mininet_fabric.fabric import Fabric
from mininet_fabric.lock import FabricLock, FabricError
from mininet_tests.priority_check import priority_check, single_flow
from mininet_fabric.system import leftovers
from topologies import load_topology
from topologies import priority_classes as pc
from topologies.mininet_topo import dpid_hex
from support.paths import REPO as REPO_PATH

pytestmark = pytest.mark.fabric
REPO = str(REPO_PATH)          # the repository (a subprocess started here imports the real packages)
SLUICE = os.path.join(os.path.dirname(sys.executable), "sluice")


def _vsctl(*args: str) -> str:
    return subprocess.run(["ovs-vsctl", "--timeout=5", *args], capture_output=True,
                          text=True).stdout.strip()


def _assert_clean():
    with FabricLock("test_fabric: checking for leftovers"):  # not while others build
        left = leftovers()
    assert left == {"shells": [], "bridges": [], "links": []}, left


# ---- two-rack, standalone: connectivity, rate, priority --------------------------------
# One fabric for the whole class; it must be gone before the other tests build theirs.

@pytest.fixture(scope="class")
def two_rack_fabric():
    with Fabric("two-rack", progress=False) as fab:
        yield fab


class TestTwoRackStandalone:
    def test_connectivity_and_setup(self, two_rack_fabric):
        fab = two_rack_fabric
        assert fab.fail_mode == "standalone"
        assert fab.ping_all() == 0.0
        # dpids and addresses come from the description, not from Mininet's name digits
        for s in fab.topology.switches:
            assert _vsctl("get", "bridge", s.name, "other_config:datapath-id").strip('"') \
                == dpid_hex(s.dpid)
            assert _vsctl("get", "bridge", s.name, "datapath_type") == "netdev"
        assert f"inet {fab.ip('h3')}/8" in fab.cmd("h3", "ip -4 addr show dev h3-eth0")
        # offloads off on host NICs (TCP stalls on the userspace datapath otherwise)
        assert "tx-checksumming: off" in fab.cmd("h1", "ethtool -k h1-eth0")
        assert fab.priority_tree_intact() == []

    def test_single_flow_is_held_to_the_emulated_rate(self, two_rack_fabric):
        result = single_flow(two_rack_fabric, "h1", "h3", seconds=4)
        assert result["nominal_mbps"] == 50.0           # 5 Gbit/s uplink * 0.01
        # near the rate (TCP gets most of it) but never above it (HTB enforces it)
        assert 0.7 * 50 < result["mbps"] <= 1.03 * 50, result

    def test_priority_top_class_beats_bottom_class(self, two_rack_fabric):
        fab = two_rack_fabric
        result = priority_check(fab, seconds=6)
        assert result["bottleneck"] == fab.intf("tor1", "spine1")
        assert result["priority_ratio"] >= 5, result
        assert result["high_mbps"] + result["low_mbps"] <= 1.03 * result["bottleneck_mbit"]
        # the marks really steered the two flows into the top and bottom HTB classes
        assert result["class_bytes"]["high"] > 5 * result["class_bytes"]["low"] > 0, result

    def test_dscp_lands_in_its_own_htb_class(self, two_rack_fabric):
        """A middle level (3) goes through class 1:4 of the bottleneck port, nothing else."""
        fab = two_rack_fabric
        port = fab.intf("tor1", "spine1")
        before = fab.class_stats(port)
        fab.cmd("h1", f"ping -c 20 -i 0.01 -Q {pc.tos_of_level(3)} {fab.ip('h3')}")
        after = fab.class_stats(port)
        grown = {cid for cid in after if after[cid]["packets"] - before.get(cid, {}).get("packets", 0)
                 >= 20}
        assert grown == {pc.htb_classid(3), pc.HTB_PARENT_CLASS}, (before, after)


# ---- the CLI: check from a fresh process, twice, no manual cleanup ---------------------

def test_fabric_check_cli_json_twice_in_a_row():
    for _ in range(2):
        proc = subprocess.run([SLUICE, "fabric", "check", "--topology", "two-rack", "--json",
                               "--seconds", "4"], capture_output=True, text=True, timeout=180,
                              cwd=REPO)
        assert proc.returncode == 0, proc.stderr[-2000:]
        result = json.loads(proc.stdout)
        assert result["loss"] == 0 and result["priority_ratio"] >= 5, result
        assert result["high_mbps"] > result["low_mbps"] > 0
    _assert_clean()


# ---- controller mode --------------------------------------------------------------------

def test_remote_controller_secure_mode(normal_controller):
    with Fabric("two-rack", controller=normal_controller, progress=False) as fab:
        assert fab.fail_mode == "secure"
        for s in fab.topology.switches:
            assert _vsctl("get", "bridge", s.name, "fail_mode") == "secure"
            assert _vsctl("get", "bridge", s.name, "protocols") == "[OpenFlow13]"
        assert "actions=NORMAL" in fab.dump_flows("tor1")
        assert fab.ping_all() == 0.0
    _assert_clean()


def test_missing_controller_fails_clearly_and_leaves_nothing():
    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(FabricError, match="did not connect to the controller"):
        with Fabric("two-rack", controller=f"127.0.0.1:{port}", wait_connected_s=2,
                    progress=False):
            pass
    _assert_clean()


# ---- topologies with loops: build and tear down only ------------------------------------

@pytest.mark.parametrize("name", ["leaf-spine", "fat-tree"])
def test_loop_topologies_build_and_tear_down(name):
    topo = load_topology(name)
    with Fabric(topo, progress=False) as fab:
        assert fab.loops and fab.fail_mode == "secure"  # no storm: nothing forwards
        bridges = set(_vsctl("list-br").split())
        assert bridges == {s.name for s in topo.switches}
        assert fab.priority_tree_intact() == []
        assert len(fab.net.hosts) == len(topo.hosts)
    _assert_clean()


# ---- crashes ----------------------------------------------------------------------------
# The test holds the global fabric lock throughout, so nobody else can build or clean in
# between; the crashing child uses a private lock file instead (SLUICE_FABRIC_LOCK).

# "up" only once the sleeper has exec'd inside h3: until then it is mnexec, which dies
# without attaching if the host's shell is killed first (a race seen under CI load).
_HOLD = ("import sys, time; from mininet_fabric.fabric import Fabric\n"
         "with Fabric('two-rack', progress=False) as fab:\n"
         "    p = fab.popen('h3', 'sleep', '3117')\n"
         "    while open(f'/proc/{p.pid}/cmdline').read() != 'sleep\\x003117\\x00':\n"
         "        time.sleep(0.01)\n"
         "    print('up', flush=True); time.sleep(120)\n")


def _start_holder(lock_path=None) -> subprocess.Popen:
    env = dict(os.environ, **({"SLUICE_FABRIC_LOCK": str(lock_path)} if lock_path else {}))
    proc = subprocess.Popen([sys.executable, "-c", _HOLD], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert line.strip() == "up", proc.stderr.read()[-2000:]
    return proc


def _sleepers() -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if l.strip() == "sleep 3117"]


def test_sigkilled_run_is_cleaned_up_by_the_next_one(tmp_path):
    with FabricLock("test_sigkilled_run"):
        proc = _start_holder(tmp_path / "private.lock")
        proc.kill()          # no chance to clean up
        proc.wait()
        left = leftovers()
        # The node shells die with their pty; bridges, veths and detached processes stay.
        assert left["bridges"] and left["links"], left
        assert _sleepers()
        # A stray veth pair named like Mininet's, as another crash might leave.
        subprocess.run(["ip", "link", "add", "tor9-eth1", "type", "veth", "peer", "name",
                        "h9-eth0"], check=True)
        with Fabric("two-rack", progress=False) as fab:   # must not hit "File exists"
            assert fab.ping_all() == 0.0
            assert "tor9-eth1" not in subprocess.run(["ip", "-o", "link"], capture_output=True,
                                                     text=True).stdout
        _assert_clean()
        assert not _sleepers()   # nothing survives in the dead hosts' namespaces


def test_sigterm_tears_down_and_clean_command(tmp_path):
    private = tmp_path / "private.lock"
    with FabricLock("test_sigterm"):
        proc = _start_holder(private)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        _assert_clean()
        assert not _sleepers()
        # `sluice fabric clean` after a SIGKILL
        proc = _start_holder(private)
        proc.kill()
        proc.wait()
        out = subprocess.run([SLUICE, "fabric", "clean"], capture_output=True, text=True,
                             timeout=60, cwd=REPO, env=dict(os.environ,
                                                            SLUICE_FABRIC_LOCK=str(private)))
        assert out.returncode == 0, out.stderr
        assert "3 bridges" in out.stdout, out.stdout
        _assert_clean()
        assert not _sleepers()


def test_lock_serialises_two_fabrics():
    """A second user waits for the first (here: times out while the first holds it)."""
    proc = _start_holder()
    try:
        started = time.monotonic()
        with pytest.raises(FabricError, match="timed out .* fabric lock"):
            with Fabric("two-rack", lock_timeout=1.5, progress=False):
                pass
        assert time.monotonic() - started >= 1.4
        assert leftovers()["bridges"]   # the holder's fabric was not touched
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    with Fabric("two-rack", progress=False) as fab:   # the failed attempt left no state
        assert fab.net is not None
    _assert_clean()
