"""Topology descriptions shared by the scheduler, the simulator and the Mininet fabric.

``load_topology("two-rack")``, ``load_topology("leaf-spine:leaves=4,spines=2")``,
``load_topology("fat-tree")`` or ``load_topology("path/to/file.yaml")`` all return a
:class:`~topologies.model.Topology`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from sluice_common.errors import InputError
from topologies import generators
from topologies.model import Host, Link, Rack, Switch, Topology, load_topology_file, parse_topology

BUILTIN_DIR = Path(__file__).parent / "builtin"

# name -> (generator, default parameters). YAML built-ins are found in BUILTIN_DIR.
# ~2,000 GPUs for scale runs (simulator only; far too big for Mininet here):
# 64 racks x 8 hosts x 4 GPUs = 2,048 GPUs, 16 racks per domain; 8 spines make each rack's
# 8 x 10 Gbit/s of hosts meet 8 x 10 Gbit/s of uplinks (1:1). The -2to1 and -4to1 fabrics
# are the same hosts under 4 and 2 spines: half and a quarter of the uplink capacity.
CLUSTER_2K = {"leaves": 64, "hosts_per_leaf": 8, "gpus": 4, "host_bw": 10000,
              "uplink_bw": 10000, "racks_per_domain": 16}
GENERATED: dict[str, tuple[Callable[..., dict[str, Any]], dict[str, Any]]] = {
    "leaf-spine": (generators.leaf_spine, {"name": "leaf-spine"}),
    "fat-tree": (generators.fat_tree, {"k": 4}),
    "cluster-2k": (generators.leaf_spine, {"name": "cluster-2k", **CLUSTER_2K, "spines": 8}),
    "cluster-2k-2to1": (generators.leaf_spine, {"name": "cluster-2k-2to1", **CLUSTER_2K,
                                                "oversubscription": 2}),
    "cluster-2k-4to1": (generators.leaf_spine, {"name": "cluster-2k-4to1", **CLUSTER_2K,
                                                "oversubscription": 4}),
}
# Parameters that decide the same thing (the spine count): one given in the spec replaces
# a built-in's default of the other, so ``cluster-2k:oversubscription=4`` and
# ``cluster-2k-2to1:spines=8`` mean what they say.
ALTERNATIVES = (("spines", "oversubscription"),)


def _merge(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    dropped = {other for group in ALTERNATIVES for key in group if key in given
               for other in group if other != key}
    return {**{k: v for k, v in defaults.items() if k not in dropped}, **given}


def builtin_names() -> list[str]:
    return sorted([p.stem for p in BUILTIN_DIR.glob("*.yaml")] + list(GENERATED))


def _parse_params(spec: str, text: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(spec, f"parameter '{item}' must look like key=value")
        try:
            params[key.strip().replace("-", "_")] = int(value)
        except ValueError:
            try:
                params[key.strip().replace("-", "_")] = float(value)
            except ValueError:
                raise InputError(spec, f"parameter '{key}' must be a number, got {value!r}")
    return params


def load_topology(spec: str | Path) -> Topology:
    """A built-in name (optionally ``name:key=value,...`` for generated ones) or a path."""
    spec = str(spec)
    name, _, param_text = spec.partition(":")
    if name in GENERATED:
        generator, defaults = GENERATED[name]
        params = _merge(defaults, _parse_params(spec, param_text))
        try:
            data = generator(**params)
        except (TypeError, ValueError) as err:
            raise InputError(spec, f"bad parameters for built-in topology '{name}': {err}")
        return parse_topology(data, f"<built-in {spec}>")
    builtin = BUILTIN_DIR / f"{spec}.yaml"
    if builtin.exists():
        return load_topology_file(builtin)
    if Path(spec).exists():
        return load_topology_file(spec)
    raise InputError(spec, "no such topology file or built-in "
                     f"(built-ins: {', '.join(builtin_names())})")


__all__ = ["Host", "Link", "Rack", "Switch", "Topology", "load_topology", "builtin_names",
           "parse_topology", "load_topology_file"]
