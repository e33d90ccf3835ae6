"""`sluice topology from-slurm`'s conversion (pure, on recorded Slurm output) and the
command-line routes of `sluice topology from-slurm` / `sluice validate --slurm`."""


import pytest

from job_scheduler.service.slurm_topology import topology_from_slurm
from slurm_client.parse import SwitchInfo, parse_topology
from slurm_client.nodes import NodeInfo, parse_sinfo_json
from sluice.cli import _route, main
from sluice_common.errors import InputError
from topologies.model import parse_topology as load_dict
from support.paths import TEST_DATA

DATA = TEST_DATA / "slurm"


def test_recorded_cluster_becomes_a_valid_topology():
    nodes = parse_sinfo_json((DATA / "sinfo.json").read_text())
    # the recording's NodeAddr is 127.0.0.1 for both nodes: give them their own
    nodes = [NodeInfo(n.name, f"10.0.0.{k + 1}", n.hostname, n.state, n.flags, n.gpus,
                      n.gpus_used, n.reason) for k, n in enumerate(nodes)]
    switches = parse_topology((DATA / "scontrol_show_topology.txt").read_text())
    data = topology_from_slurm(nodes, switches, host_link_gbps=100, uplink_gbps=400)
    topo = load_dict(data, "from-slurm")
    assert {h.name: (h.rack, h.gpus, h.ip, h.bw) for h in topo.hosts} == {
        "n1": ("rack1", 4, "10.0.0.1", 100000.0), "n2": ("rack2", 4, "10.0.0.2", 100000.0)}
    assert {s.name: s.role for s in topo.switches} == {"rack1": "tor", "rack2": "tor",
                                                       "spine": "spine"}
    assert {(l.a, l.b, l.bw) for l in topo.links} == {("rack1", "spine", 400000.0),
                                                       ("rack2", "spine", 400000.0)}


def test_deeper_trees_no_topology_conf_and_bad_addresses():
    n = [NodeInfo(f"g{k}", f"10.1.0.{k}", f"g{k}", "IDLE", gpus=8) for k in range(1, 5)]
    sw = [SwitchInfo("l1", 0, ("g1", "g2")), SwitchInfo("l2", 0, ("g3", "g4")),
          SwitchInfo("a1", 1, switches=("l1", "l2")), SwitchInfo("c1", 2, switches=("a1",))]
    topo = load_dict(topology_from_slurm(n, sw, host_link_gbps=1, uplink_gbps=2), "x")
    assert {s.name: s.role for s in topo.switches} == {"l1": "tor", "l2": "tor", "a1": "agg",
                                                       "c1": "core"}
    flat = load_dict(topology_from_slurm(n, [], host_link_gbps=1, uplink_gbps=2), "x")
    assert [r.name for r in flat.racks] == ["rack1"] and flat.total_gpus == 32
    with pytest.raises(InputError, match="NodeAddr 'gpu-node-1' is not an IPv4"):
        topology_from_slurm([NodeInfo("g1", "gpu-node-1", "g1", "IDLE")], [],
                            host_link_gbps=1, uplink_gbps=1)
    with pytest.raises(InputError, match="under no leaf switch.*g4"):
        topology_from_slurm(n, sw[:1] + [SwitchInfo("l2", 0, ("g3",))], host_link_gbps=1,
                            uplink_gbps=1)


def test_routes_and_bad_arguments(capsys, tmp_path):
    assert _route("topology", ["from-slurm", "--out", "x"])[1] == "from_slurm"
    assert _route("validate", ["--slurm=x.yaml"])[1] == "validate_slurm"
    assert _route("validate", ["jobs.yaml"]) is None
    assert _route("topology", ["show", "two-rack"]) is None
    rc = main(["topology", "from-slurm", "--out", str(tmp_path / "t.yaml"),
               "--host-link-gbps", "0", "--uplink-gbps", "1"])
    assert rc == 2 and "--host-link-gbps" in capsys.readouterr().err
    rc = main(["topology", "from-slurm", "--out", str(tmp_path / "no" / "t.yaml"),
               "--host-link-gbps", "1", "--uplink-gbps", "1"])
    assert rc == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "t.yaml").exists()


def _two_racks():
    n = [NodeInfo(f"g{k}", f"10.1.0.{k}", f"g{k}", "IDLE", gpus=8) for k in range(1, 5)]
    sw = [SwitchInfo("l1", 0, ("g1", "g2")), SwitchInfo("l2", 0, ("g3", "g4")),
          SwitchInfo("s1", 1, switches=("l1", "l2"))]
    return n, sw


def test_switch_datapath_ids_come_from_the_file_in_every_spelling():
    from job_scheduler.service.switch_dpids import parse_switch_dpids

    dpids = parse_switch_dpids({"l1": 7, "l2": "0x1f", "s1": "00:00:00:00:00:00:01:00"}, "d.yaml")
    assert dpids == {"l1": 7, "l2": 31, "s1": 256}
    n, sw = _two_racks()
    topo = load_dict(topology_from_slurm(n, sw, host_link_gbps=1, uplink_gbps=2,
                                         switch_dpids=dpids), "x")
    assert {s.name: s.dpid for s in topo.switches} == {"l1": 7, "l2": 31, "s1": 256}
    # without a file: written out, numbered in the file's switch order
    plain = topology_from_slurm(n, sw, host_link_gbps=1, uplink_gbps=2)
    assert [(s["name"], s["dpid"]) for s in plain["switches"]] == [("l1", 1), ("l2", 2),
                                                                    ("s1", 3)]


def test_bad_switch_dpids_name_the_file_and_the_switch():
    from job_scheduler.service.switch_dpids import parse_switch_dpids

    with pytest.raises(InputError) as err:
        parse_switch_dpids({"l1": 0, "l2": "0xzz", "s1": True, "s2": "00:01", "s3": 5,
                            "s4": 5, "s5": 2 ** 64}, "d.yaml")
    text = str(err.value)
    for field in ("l1", "l2", "s1", "s2", "s4", "s5"):
        assert f"d.yaml" in text and field in text, text
    assert "also s3's" in text
    with pytest.raises(InputError, match="must be a YAML mapping"):
        parse_switch_dpids(["l1"], "d.yaml")
    n, sw = _two_racks()
    with pytest.raises(InputError) as err:
        topology_from_slurm(n, sw, host_link_gbps=1, uplink_gbps=2,
                            switch_dpids={"l1": 1, "s1": 3, "x9": 4}, dpids_source="d.yaml")
    text = str(err.value)
    assert "no datapath id for switch(es) l2" in text and "x9 are not in topology.conf" in text


def test_from_slurm_refuses_a_bad_dpid_file_before_asking_slurm(capsys, tmp_path):
    bad = tmp_path / "dpids.yaml"
    bad.write_text("tor1: nope\n")
    rc = main(["topology", "from-slurm", "--out", str(tmp_path / "t.yaml"),
               "--host-link-gbps", "1", "--uplink-gbps", "1", "--switch-dpids", str(bad)])
    err = capsys.readouterr().err
    assert rc == 2 and str(bad) in err and "tor1" in err and "not a datapath id" in err, err
    assert not (tmp_path / "t.yaml").exists()
