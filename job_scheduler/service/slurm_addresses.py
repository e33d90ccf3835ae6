"""``--slurm-fabric-addresses FILE``: each Slurm node's address on the data fabric, where
a site keeps it apart from the management address Slurm knows the node by (NodeAddr:
Ethernet; data fabric: InfiniBand or RoCE). The topology's host addresses are the data
fabric's (the PS traffic and the controller's rules use them); the file tells the
scheduler that node ``gpu01`` at NodeAddr 10.1.0.1 is the topology's 10.100.0.1::

    gpu01: 10.100.0.1
    gpu02: 10.100.0.2

Nodes not in the file must have the topology's address as their NodeAddr.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from sluice_common.errors import InputError, raise_all


def parse_fabric_addresses(data: object, source: str) -> dict[str, str]:
    """{node: address}; every bad entry at once (InputError naming the node)."""
    if not isinstance(data, dict) or not data:
        raise InputError(source, "must be a YAML mapping of Slurm node name to data-fabric "
                         f"address (gpu01: 10.100.0.1), got {type(data).__name__}")
    out, errors = {}, []
    for node, address in data.items():
        try:
            if not isinstance(node, str) or not node:
                raise ValueError("a node name must be a non-empty string")
            out[node] = str(ipaddress.ip_address(address if isinstance(address, str) else ""))
        except ValueError as err:
            errors.append(InputError(source, f"{address!r} is not an IP address" if
                                     isinstance(node, str) and node else str(err),
                                     field=str(node)))
    if len(set(out.values())) != len(out):
        seen: dict[str, str] = {}
        for node, address in out.items():
            if address in seen:
                errors.append(InputError(source, f"address {address} is also {seen[address]}'s",
                                         field=node))
            seen.setdefault(address, node)
    raise_all(errors)
    return out


def load_fabric_addresses(path: str | Path | None) -> dict[str, str] | None:
    """The file's map, None without one; InputError (exit 2) naming the file."""
    if path is None:
        return None
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except OSError as err:
        raise InputError(str(path), f"cannot read: {err.strerror or err}")
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise InputError(str(path), f"not valid YAML: {' '.join(str(err).split())}")
    return parse_fabric_addresses(data, str(path))
