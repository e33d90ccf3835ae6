"""The emulated management network on a real fabric (mininet_fabric/management.py): every
host reaches the root namespace's management address over its own veth, off the data
plane, and the bridge and veths are gone after a run that failed. Needs root and Open
vSwitch; fails loudly otherwise (tests/conftest.py), never skipped."""

from __future__ import annotations

import socket
import sys

import pytest

from mininet_fabric.fabric import Fabric
from mininet_fabric.lock import FabricLock
from mininet_fabric.management import BRIDGE, HOST_END, ManagementNet
from mininet_fabric.system import leftovers, link_names

pytestmark = pytest.mark.fabric

CONNECT = ("import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), "
           "timeout=5).close(); print('connected')")


def test_hosts_reach_the_management_address_and_nothing_is_left_after_a_failure():
    with pytest.raises(RuntimeError, match="the run failed"):
        with ManagementNet() as mgmt, Fabric("two-rack", progress=False, management=mgmt) as fab:
            with socket.socket() as server:       # a service of the root namespace there
                server.bind((mgmt.address, 0))
                server.listen(8)
                port = server.getsockname()[1]
                for h in fab.topology.hosts:
                    out = fab.cmd(h.name, f"{sys.executable} -c \"{CONNECT}\" {mgmt.address} {port} 2>&1")
                    assert "connected" in out, (h.name, out)
                    # the management address over mgmt0; the other hosts over the data plane
                    assert f"dev {HOST_END}" in fab.cmd(h.name, f"ip -4 route get {mgmt.address}")
                    other = next(o for o in fab.topology.hosts if o.name != h.name)
                    assert f"dev {h.name}-eth0" in fab.cmd(h.name, f"ip -4 route get {other.ip}")
            assert set(mgmt.addresses) == {h.name for h in fab.topology.hosts}
            raise RuntimeError("the run failed")
    with FabricLock("test_management_fabric"):   # no other fabric comes up meanwhile
        names = link_names()
        assert BRIDGE not in names and not [n for n in names if n.startswith("slmg")], names
        assert leftovers() == {"shells": [], "bridges": [], "links": []}
