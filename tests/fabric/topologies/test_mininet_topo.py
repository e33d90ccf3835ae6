"""The Mininet Topo built from a topology description (imports mininet: Debian's
python3-mininet, which `make test` installs; the rest of topologies.mininet_topo, pure:
tests/unit/mininet_fabric/test_fabric.py)."""

from __future__ import annotations

import pytest

from topologies import load_topology
from topologies.mininet_topo import build_mininet_topo, mac_of


@pytest.mark.fabric      # imports mininet (Debian's python3-mininet), which `make test` installs
def test_mininet_topo_uses_description_dpids_ips_and_macs():
    t = load_topology("two-rack")
    topo = build_mininet_topo(t)
    assert sorted(topo.switches()) == ["spine1", "tor1", "tor2"]
    # Mininet would give tor1 and spine1 the same dpid (from the digit in the name)
    dpids = {s: topo.nodeInfo(s)["dpid"] for s in topo.switches()}
    assert dpids == {s.name: f"{s.dpid:016x}" for s in t.switches}
    assert len(set(dpids.values())) == 3
    h3 = topo.nodeInfo("h3")
    assert h3["ip"] == "10.0.0.3/8" and h3["mac"] == mac_of("10.0.0.3") == "02:00:0a:00:00:03"
    assert topo.port("h1", "tor1") == (0, 1)
    assert topo.port("tor1", "spine1") == (3, 1)
