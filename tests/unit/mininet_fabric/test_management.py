"""The emulated fabric's management network (mininet_fabric/management.py): its addresses,
the ip commands that attach a host, and that the bridge and veths go away on every way
out. No root: the ip commands are recorded, the hosts are stand-ins."""

from __future__ import annotations

import ipaddress
import subprocess

import pytest

from mininet_fabric import management as m
from mininet_fabric.lock import FabricError
from topologies import load_topology


def test_every_host_gets_its_own_address_off_the_data_plane_and_the_bridge():
    topo = load_topology("two-rack")
    names = [h.name for h in topo.hosts]
    addrs = m.host_addresses(names)
    assert list(addrs) == names and len(set(addrs.values())) == len(names)
    data = ipaddress.ip_network("10.0.0.0/8")
    for a in addrs.values():
        ip = ipaddress.ip_address(a)
        assert ip in m.NETWORK and ip not in data and a != m.ADDRESS
    assert ipaddress.ip_address(m.ADDRESS) in m.NETWORK and ipaddress.ip_address(m.ADDRESS) not in data
    assert all(h.ip not in addrs.values() for h in topo.hosts)


def test_more_hosts_than_the_network_holds_is_refused():
    with pytest.raises(FabricError, match="room for"):
        m.host_addresses([f"h{i}" for i in range(m.NETWORK.num_addresses)])


def test_attach_lines_and_host_command():
    assert m.attach_lines(3, 4242) == [
        "link add slmg3 type veth peer name mgmt0 netns 4242",
        f"link set slmg3 master {m.BRIDGE} up"]
    cmd = m.host_command("198.18.0.7")
    assert "ip addr add 198.18.0.7/16 dev mgmt0" in cmd and "ip link set mgmt0 up" in cmd


class Host:
    def __init__(self, name, pid, fails=False):
        self.name, self.pid, self.fails, self.cmds = name, pid, fails, []

    def cmd(self, text):
        self.cmds.append(text)
        return "RTNETLINK answers: File exists" if self.fails else "rc=0\n"


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    """The ip batches run, in order; the links present (what remove_leftovers sees)."""
    monkeypatch.setenv("SLUICE_FABRIC_LOCK", str(tmp_path / "lock"))
    monkeypatch.setattr(m, "require_root", lambda: None)
    batches: list[list[str]] = []
    present: list[str] = []

    def ip_batch(lines, force=False):
        batches.append(list(lines))
        return subprocess.CompletedProcess(["ip"], 0, "", "")
    monkeypatch.setattr(m, "_ip_batch", ip_batch)
    monkeypatch.setattr(m, "link_names", lambda: list(present))
    return batches, present


def test_hosts_are_attached_and_everything_is_removed_on_exit(recorded):
    batches, present = recorded
    present += ["eth0", m.BRIDGE, "slmg9"]              # a crashed run's leftovers
    hosts = [Host("h1", 11), Host("h2", 12)]
    with m.ManagementNet() as net:
        assert batches[0] == [f"link delete dev {m.BRIDGE}", "link delete dev slmg9"]
        assert batches[1][0] == f"link add {m.BRIDGE} type bridge"
        assert f"addr add {m.ADDRESS}/16 dev {m.BRIDGE}" in batches[1]
        net.attach(hosts)
        assert batches[2] == m.attach_lines(0, 11) + m.attach_lines(1, 12)
        assert net.addresses == m.host_addresses(["h1", "h2"])
        assert net.url(8080) == f"http://{m.ADDRESS}:8080"
        present[:] = ["eth0", m.BRIDGE, "slmg0", "slmg1"]
    assert batches[3] == ["link delete dev slmg0", "link delete dev slmg1"]
    assert batches[4] == [f"link delete dev {n}" for n in (m.BRIDGE, "slmg0", "slmg1")]
    assert net.addresses == {} and net._lock is None


def test_a_failed_attach_names_the_host_and_still_removes_everything(recorded):
    batches, present = recorded
    with pytest.raises(FabricError, match="h2"):
        with m.ManagementNet() as net:
            present[:] = [m.BRIDGE]
            net.attach([Host("h1", 11), Host("h2", 12, fails=True)])
    assert ["link delete dev slmg0", "link delete dev slmg1"] in batches
    assert batches[-1] == [f"link delete dev {m.BRIDGE}"]
    assert net._lock is None


def test_a_bridge_that_cannot_be_made_is_an_error_and_releases_the_lock(recorded, monkeypatch):
    def refuse(lines, force=False):
        return subprocess.CompletedProcess(["ip"], 1, "", "Operation not permitted")
    monkeypatch.setattr(m, "_ip_batch", refuse)
    net = m.ManagementNet()
    with pytest.raises(FabricError, match="Operation not permitted"):
        net.__enter__()
    assert net._lock is None
