"""A topology from a running Slurm cluster, and a topology checked against one.

    sluice topology from-slurm --out cluster.yaml --host-link-gbps 100 --uplink-gbps 400
    sluice validate --slurm cluster.yaml

From Slurm (``sinfo --json`` and ``scontrol show topology``, i.e. topology.conf):
- every node is a host: its GPUs from its GRES (``gpu:4``, whole GPUs of any type; MIG
  slices apart), its address from ``NodeAddr`` or, where the data fabric is not the
  network Slurm uses, from ``--fabric-addresses FILE`` (``{node: address}``); it is the
  address the controller and the PS processes use, so it must be an IPv4 address;
- every leaf switch (level 0) is a rack with that switch as its ToR; the switches above
  are the fabric (level 1 under one top: spine; deeper trees: agg below, core on top),
  linked to their children at ``--uplink-gbps``; host links at ``--host-link-gbps``;
- no topology.conf (no switches): one rack, ``rack1`` under ToR ``tor1``.
Link speeds are the user's: Slurm's LinkSpeed is a relative weight, not a rate.

:func:`topology_from_slurm` is pure (parsed nodes and switches in, the YAML mapping out);
the result goes through the topology loader's own validation.
"""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from job_scheduler.service.slurm_addresses import load_fabric_addresses
from job_scheduler.service.switch_dpids import assign_dpids, load_switch_dpids
from slurm_client import NodeInfo, SwitchInfo
from topologies import Topology
from sluice_common.errors import InputError, option_error


def topology_from_slurm(nodes: Sequence[NodeInfo], switches: Sequence[SwitchInfo], *,
                        host_link_gbps: float, uplink_gbps: float,
                        name: str = "slurm-cluster", source: str = "slurm",
                        fabric_addresses: dict[str, str] | None = None,
                        switch_dpids: dict[str, int] | None = None,
                        dpids_source: str = "switch datapath ids") -> dict[str, Any]:
    """The topology mapping; each switch carries its datapath id (``switch_dpids``, which
    must name every switch, else numbered 1..N: see :mod:`switch_dpids`)."""
    if not nodes:
        raise InputError(source, "Slurm has no nodes")
    fabric = fabric_addresses or {}
    address = {n.name: fabric.get(n.name, n.address) for n in nodes}
    problems = []
    for n in nodes:
        try:
            ipaddress.IPv4Address(address[n.name])
        except ValueError:
            problems.append(f"node {n.name}: NodeAddr {n.address!r} is not an IPv4 address "
                            "(set NodeAddr to the node's fabric address in slurm.conf, or "
                            "give it in --fabric-addresses)")
    if problems:
        raise InputError(source, "; ".join(problems), field="NodeAddr")
    host_bw, up_bw = host_link_gbps * 1000.0, uplink_gbps * 1000.0
    leaves = [s for s in switches if s.level == 0]
    rack_of: dict[str, str] = {}
    for leaf in leaves:
        for node in leaf.nodes:
            rack_of.setdefault(node, leaf.name)
    out_switches: list[dict] = []
    links: list[dict] = []
    if leaves:
        top = max(s.level for s in switches)

        def role(level: int) -> str:
            if level == 0:
                return "tor"
            if level == top:
                return "spine" if top == 1 else "core"
            return "agg"
        for s in sorted(switches, key=lambda s: (s.level, s.name)):
            out_switches.append({"name": s.name, "role": role(s.level)})
            for child in s.switches:
                links.append({"a": child, "b": s.name, "bw": up_bw})
        racks = [{"name": leaf.name, "tor": leaf.name} for leaf in leaves]
    else:
        out_switches = [{"name": "tor1", "role": "tor"}]
        racks = [{"name": "rack1", "tor": "tor1"}]
    missing = [n.name for n in nodes if leaves and n.name not in rack_of]
    if missing:
        raise InputError(source, f"node(s) under no leaf switch of topology.conf: "
                         f"{', '.join(missing)}", field="topology.conf")
    ids = assign_dpids([s["name"] for s in out_switches], switch_dpids, dpids_source)
    for s in out_switches:
        s["dpid"] = ids[s["name"]]
    hosts = [{"name": n.name, "rack": rack_of.get(n.name, "rack1"), "gpus": n.gpus,
              "bw": host_bw, "ip": address[n.name]} for n in nodes]
    return {"name": name,
            "description": f"written by `sluice topology from-slurm` from {len(nodes)} Slurm "
                           f"node(s) and {len(switches)} topology.conf switch(es)",
            "switches": out_switches, "racks": racks, "hosts": hosts, "links": links}


# ---- sluice topology from-slurm (its command line: job_scheduler/service/slurm_topology_cli.py) ----

def _slurm_error(err) -> InputError:
    return InputError("slurm", f"Slurm is not usable: {err}")


def write_from_slurm(out: Path, *, host_link_gbps: float, uplink_gbps: float,
                     name: str = "slurm-cluster", bw_scale: float | None = None,
                     fabric_addresses: str | None = None,
                     switch_dpids: str | None = None) -> int:
    """Write the running Slurm cluster's topology to ``out`` (checked by the topology
    loader first); a bad value raises an option error naming its parameter."""
    import yaml

    from slurm_client import SlurmClient, SlurmError
    from topologies.model import parse_topology

    for field, value in (("host_link_gbps", host_link_gbps), ("uplink_gbps", uplink_gbps)):
        if not value > 0:
            raise option_error(field, "must be > 0")
    if bw_scale is not None and not bw_scale > 0:
        raise option_error("bw_scale", "must be > 0")
    out = Path(out)
    if not out.parent.is_dir():
        raise InputError(str(out), f"directory {str(out.parent)!r} does not exist",
                         field="out")
    fabric = load_fabric_addresses(fabric_addresses)
    dpids = load_switch_dpids(switch_dpids)
    client = SlurmClient()
    try:
        nodes = client.nodes()
        switches = client.topology()
    except (SlurmError, ValueError) as err:     # ValueError: a release sluice cannot read
        raise _slurm_error(err)
    data = topology_from_slurm(nodes, switches, host_link_gbps=host_link_gbps,
                               uplink_gbps=uplink_gbps, name=name, fabric_addresses=fabric,
                               switch_dpids=dpids, dpids_source=str(switch_dpids))
    if bw_scale is not None:
        data["emulation"] = {"bw_scale": bw_scale}
    topo = parse_topology(data, str(out))       # the loader's checks, before writing
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    print(f"{out}: {len(topo.hosts)} hosts, {topo.total_gpus} GPUs, {len(topo.racks)} "
          f"racks, {len(topo.switches)} switches (from Slurm)")
    if dpids is None:
        # Slurm does not know OpenFlow: numbered ids match the emulated fabric only
        print(f"note: {out}: switch datapath ids numbered 1..{len(topo.switches)}; on real "
              "switches give --switch-dpids FILE ({switch: dpid}) or edit each switch's "
              "'dpid:' to the id it announces (ovs-ofctl show), or the controller will not "
              "recognise them", file=sys.stderr)
    return 0


# ---- sluice validate --slurm ---------------------------------------------------------

def check_topology(topology: Topology, nodes: Sequence[NodeInfo],
                   fabric_addresses: Mapping[str, str] | None = None) -> list[str]:
    """Problems of ``topology`` against Slurm's nodes: a host Slurm does not know, an
    address other than the node's data-fabric address (``fabric_addresses[node]``, else
    its NodeAddr), more GPUs than Slurm configures (whole GPUs of any type: with a GPU
    type, a node's GPUs of other types are taken away by :func:`apply_capacity`)."""
    fabric = fabric_addresses or {}
    by_name = {n.name: n for n in nodes}
    problems = []
    unknown = [h.name for h in topology.hosts if h.name not in by_name]
    if unknown:
        problems.append(f"host(s) not known to Slurm: {', '.join(unknown)} (Slurm's nodes: "
                        f"{', '.join(sorted(by_name)) or 'none'})")
    for h in topology.hosts:
        n = by_name.get(h.name)
        if n is None:
            continue
        if h.name in fabric and fabric[h.name] != h.ip:
            problems.append(f"host {h.name}: ip {h.ip} but its data-fabric address is "
                            f"{fabric[h.name]}")
        elif h.name not in fabric and n.address != h.ip:
            problems.append(f"host {h.name}: ip {h.ip} but Slurm's NodeAddr is {n.address} "
                            "(a data fabric apart from NodeAddr: --slurm-fabric-addresses)")
        if h.gpus > n.gpus:
            problems.append(f"host {h.name}: {h.gpus} GPUs but Slurm configures {n.gpus}")
    return problems



def validate_against_slurm(topology_spec: str, fabric_addresses: str | None = None) -> int:
    """Every host of the topology is a Slurm node at the same address (its NodeAddr, or
    its data-fabric address from ``fabric_addresses``) with at least its GPUs; exit 2
    naming the hosts otherwise."""
    from slurm_client import SlurmClient, SlurmError
    from topologies import load_topology

    topo = load_topology(topology_spec)
    fabric = load_fabric_addresses(fabric_addresses)
    try:
        nodes = SlurmClient().nodes()
    except (SlurmError, ValueError) as err:     # ValueError: a release sluice cannot read
        raise _slurm_error(err)
    problems = check_topology(topo, nodes, fabric)
    if problems:
        raise InputError(topology_spec, "; ".join(problems), field="hosts")
    by_name = {n.name: n for n in nodes}
    down = [f"{h.name} ({by_name[h.name].state_text})" for h in topo.hosts
            if not by_name[h.name].usable]
    print(f"{topology_spec}: ok against Slurm: {len(topo.hosts)} hosts are Slurm nodes at "
          f"their addresses ({topo.total_gpus} GPUs)"
          + (f"; not taking work now: {', '.join(down)}" if down else ""))
    extra = sorted(set(by_name) - set(topo.host_by_name))
    if extra:
        print(f"  Slurm nodes not in the topology (sluice will not use them): "
              f"{', '.join(extra)}", file=sys.stderr)
    return 0
