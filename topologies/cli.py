"""``sluice topology show|check NAME|PATH``: print or validate a topology description."""

from __future__ import annotations

import json

import yaml

from topologies import builtin_names, load_topology


def configure_topology(parser) -> None:
    parser.add_argument("action", choices=["show", "check", "list"],
                        help="show: print the description as YAML (or JSON); check: validate it; "
                             "list: the built-in names (and `sluice topology from-slurm --help`: "
                             "a topology from a running Slurm cluster)")
    parser.add_argument("topology", nargs="?", default="two-rack", help="built-in name or YAML path")
    parser.add_argument("--json", action="store_true", help="print JSON instead of YAML/text")


def run_topology(args) -> int:
    if args.action == "list":
        print("\n".join(builtin_names()))
        return 0
    topo = load_topology(args.topology)
    if args.action == "show":
        data = topo.to_dict()
        print(json.dumps(data, indent=2) if args.json else yaml.safe_dump(data, sort_keys=False))
        return 0
    summary = {"name": topo.name, "hosts": len(topo.hosts), "switches": len(topo.switches),
               "racks": len(topo.racks), "gpus": topo.total_gpus,
               "oversubscription": topo.oversubscription()}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{topo.source}: ok — {summary['hosts']} hosts, {summary['gpus']} GPUs, "
              f"{summary['racks']} racks, {summary['switches']} switches")
    return 0
