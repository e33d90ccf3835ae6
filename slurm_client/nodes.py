"""Slurm's nodes as sluice reads them (pure): :class:`NodeInfo`, and ``sinfo --json`` in
every layout :mod:`slurm_client.versions` knows (22.05's node list, 23.02 on: node groups).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from slurm_client.gres import gpus_by_type, whole_gpus
from slurm_client.versions import UnsupportedSlurm, layout_for, version_from_meta

# Node states in which a node takes no new work (base state or flag, upper case).
# Not PLANNED: backfill's mark for a node it holds for a pending job. 22.05 can leave it on
# idle nodes after that job has gone (seen in CI: a retry found no capacity for 90 s), and a
# node truly held is refused by slurmctld itself, which keeps the job pending with a reason.
UNUSABLE = frozenset({"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "MAINT",
                      "MAINTENANCE", "NOT_RESPONDING", "POWER_DOWN", "POWERED_DOWN",
                      "POWERING_DOWN", "POWER_DRAIN", "REBOOT_REQUESTED", "REBOOT_ISSUED",
                      "RESERVED", "FUTURE", "UNKNOWN", "INVALID_REG", "INVALID", "NO_RESPOND",
                      "ERROR"})


class ParseError(ValueError):
    """Output of a Slurm command that does not look like what Slurm prints."""


@dataclass(frozen=True)
class NodeInfo:
    name: str
    address: str
    hostname: str
    state: str                      # base state, upper case: IDLE, MIXED, ALLOCATED, DOWN ...
    flags: frozenset[str] = frozenset()     # DRAIN, NOT_RESPONDING, ...
    gpus: int = 0                   # whole GPUs configured (any type; MIG slices apart)
    gpus_used: int = 0              # of them allocated to any job, sluice's or another user's
    reason: str = ""
    gpu_types: tuple[tuple[str, int], ...] = ()       # (type, configured); "" = untyped
    gpu_types_used: tuple[tuple[str, int], ...] = ()
    cpus: int = 0
    cpus_used: int = 0
    memory_mb: int = 0
    memory_used_mb: int = 0
    partitions: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        """Takes new work: not down, drained, failed, in maintenance or not responding."""
        return self.state not in UNUSABLE and not (self.flags & UNUSABLE)

    @property
    def state_text(self) -> str:
        return "+".join([self.state, *sorted(self.flags)])

    def gpus_of(self, gpu_type: str | None) -> tuple[int, int]:
        """(configured, allocated) GPUs a request for ``gpu_type`` can use (None: whole
        GPUs of any type)."""
        if not gpu_type:
            return self.gpus, self.gpus_used
        return dict(self.gpu_types).get(gpu_type, 0), dict(self.gpu_types_used).get(gpu_type, 0)


def node_state(text: str) -> tuple[str, frozenset[str]]:
    """``MIXED+DRAIN`` / ``IDLE*`` (not responding) -> ("MIXED", {"DRAIN"})."""
    text = (text or "").strip().upper()
    flags = set()
    if text.endswith("*"):
        flags.add("NOT_RESPONDING")
        text = text.rstrip("*")
    base, *rest = text.split("+")
    flags.update(f for f in rest if f)
    return base, frozenset(flags)


def _number(value: object) -> int:
    """A count as the data parsers print it: a number, or (v0.0.40 on, for values that
    may be unset) ``{"set": true, "infinite": false, "number": N}``."""
    if isinstance(value, dict):
        value = value.get("number") if value.get("set", True) else 0
    try:
        return int(value)          # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0


def gres_fields(total: str | None, used: str | None) -> dict:
    """NodeInfo's GPU fields from a node's configured and allocated GRES."""
    by_type, used_by_type = gpus_by_type(total), gpus_by_type(used)
    return dict(gpus=whole_gpus(by_type), gpus_used=whole_gpus(used_by_type),
                gpu_types=tuple(sorted(by_type.items())),
                gpu_types_used=tuple(sorted(used_by_type.items())))


def _node_v38(n: dict) -> NodeInfo:
    """One node of 22.05's ``sinfo --json``."""
    flags = frozenset(str(f).upper() for f in n.get("state_flags") or ())
    base, more = node_state(str(n.get("state", "")))
    return NodeInfo(name=n["name"], address=n.get("address") or n["name"],
                    hostname=n.get("hostname") or n["name"], state=base, flags=flags | more,
                    reason=n.get("reason") or "", **gres_fields(n.get("gres"), n.get("gres_used")),
                    cpus=_number(n.get("cpus")), cpus_used=_number(n.get("alloc_cpus")),
                    memory_mb=_number(n.get("real_memory")),
                    memory_used_mb=_number(n.get("alloc_memory")),
                    partitions=tuple(n.get("partitions") or ()))


def _nodes_of_group(g: dict) -> list[NodeInfo]:
    """The nodes of one group of 23.02+'s ``sinfo --json`` (one node with ``--Node``;
    nodes grouped together share the group's state, GRES and reason)."""
    listed = g.get("nodes") or {}
    names = list(listed.get("nodes") or ())
    addresses = list(listed.get("addresses") or ())
    hostnames = list(listed.get("hostnames") or ())
    aligned = len(addresses) == len(names) and len(hostnames) == len(names)
    states = [str(s).upper() for s in (g.get("node") or {}).get("state") or ()]
    base, flags = (states[0], frozenset(states[1:])) if states else ("UNKNOWN", frozenset())
    part = (g.get("partition") or {}).get("name")
    shared = dict(state=base, flags=flags, reason=(g.get("reason") or {}).get("description") or "",
                  **gres_fields((g.get("gres") or {}).get("total"), (g.get("gres") or {}).get("used")),
                  cpus=_number((g.get("cpus") or {}).get("total")) // max(1, len(names)),
                  cpus_used=_number((g.get("cpus") or {}).get("allocated")) // max(1, len(names)),
                  memory_mb=_number((g.get("memory") or {}).get("maximum")),
                  memory_used_mb=_number((g.get("memory") or {}).get("allocated")),
                  partitions=(part,) if part else ())
    return [NodeInfo(name=name, address=addresses[k] if aligned else name,
                     hostname=hostnames[k] if aligned else name, **shared)
            for k, name in enumerate(names)]


def _merge(nodes: list[NodeInfo]) -> list[NodeInfo]:
    """One record per node: a node in several partitions is listed once per partition."""
    from dataclasses import replace

    out: dict[str, NodeInfo] = {}
    for n in nodes:
        seen = out.get(n.name)
        out[n.name] = n if seen is None else replace(
            seen, partitions=tuple(dict.fromkeys(seen.partitions + n.partitions)))
    return list(out.values())


def parse_sinfo_json(text: str) -> list[NodeInfo]:
    """``sinfo --json`` of any supported release (the layout is the one its ``meta``
    names); ParseError for anything else, UnsupportedSlurm for a release not known."""
    try:
        data = json.loads(text)
        version = version_from_meta(data.get("meta"))
    except (ValueError, AttributeError) as err:
        raise ParseError(f"sinfo --json: unexpected output ({err})")
    layout = layout_for(version)          # UnsupportedSlurm names the version
    key = "sinfo" if layout.grouped else "nodes"
    records = data.get(key)
    if not isinstance(records, list):
        raise ParseError(f"sinfo --json of Slurm {version}: no '{key}' list "
                         f"(keys: {', '.join(sorted(data)) or 'none'})")
    try:
        if layout.grouped:
            return _merge([n for g in records for n in _nodes_of_group(g)])
        return [_node_v38(n) for n in records]
    except (KeyError, TypeError, AttributeError) as err:
        raise ParseError(f"sinfo --json of Slurm {version}: unexpected record ({err!r})")


__all__ = ["NodeInfo", "ParseError", "UNUSABLE", "UnsupportedSlurm", "gres_fields",
           "node_state", "parse_sinfo_json"]
