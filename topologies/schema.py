"""Typed model of the topology file (pydantic): every problem in one run, and a JSON Schema.

Modelled fields: name, description, domains, emulation.bw_scale; switches (name, role,
dpid); racks (name, tor, domain); hosts (name, rack, gpus, bw, ip, intra_bw); links (a, b, bw).
Adding a field is one line in the element's model (and one in ``model.py``'s dataclass).
The structure (types, ranges, unknown fields) is checked by the models; the references
between elements (a host's rack, a rack's ToR, link ends, unique names) by
:func:`cross_checks`, on whatever elements are well-formed, in the same run.
``sluice schema topology`` prints :func:`json_schema`.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from sluice_common.errors import InputError
from sluice_common.validation import validate_document

SWITCH_ROLES = ("tor", "agg", "spine", "core")
Name = Annotated[str, Field(min_length=1)]
Mbits = Annotated[float, Field(gt=0, allow_inf_nan=False, description="Mbit/s")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SwitchModel(_Strict):
    name: Name
    role: Literal["tor", "agg", "spine", "core"] = "tor"
    dpid: Annotated[StrictInt, Field(gt=0)] | None = Field(
        None, description="OpenFlow datapath id (default: position + 1)")


class RackModel(_Strict):
    name: Name
    tor: Name = Field(description="the rack's top-of-rack switch")
    domain: str | None = Field(None, description="default: from `domains`, else 'cluster'")


class HostModel(_Strict):
    name: Name
    rack: Name
    gpus: Annotated[StrictInt, Field(ge=0)]
    bw: Mbits = Field(description="host <-> ToR link, Mbit/s")
    ip: str | None = Field(None, description="IPv4 (default 10.0.0.<position+1>)")
    intra_bw: Mbits | None = Field(None, description="in-host exchange (PS <-> workers on "
                                   "this host), Mbit/s (default 100,000: PCIe 3.0 x16 class)")

    @field_validator("ip")
    @classmethod
    def _ipv4(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ipaddress.IPv4Address(value)
            except ValueError:
                raise ValueError(f"not an IPv4 address: {value!r}")
        return value


class LinkModel(_Strict):
    a: Name
    b: Name
    bw: Mbits


class EmulationModel(_Strict):
    bw_scale: float = Field(1.0, gt=0, allow_inf_nan=False,
                            description="Mininet runs every link at bw * bw_scale Mbit/s")


class TopologyFile(_Strict):
    """A sluice topology: racks of GPU hosts under ToR switches, joined by switch links."""
    model_config = ConfigDict(title="sluice topology")
    name: Name
    description: str | None = None
    domains: dict[str, list[str] | None] = Field(default_factory=dict,
                                                 description="domain -> its racks")
    emulation: EmulationModel | None = None
    switches: list[SwitchModel] = Field(default_factory=list)
    racks: list[RackModel] = Field(default_factory=list)
    hosts: Annotated[list[HostModel], Field(min_length=1)]
    links: list[LinkModel] = Field(default_factory=list, description="switch <-> switch only")


ELEMENTS = {"switches": ("switch", SwitchModel), "racks": ("rack", RackModel),
            "hosts": ("host", HostModel), "links": ("link", LinkModel)}


def _label(kind: str, raw: Any, index: int) -> str:
    if isinstance(raw, dict):
        if kind == "link" and isinstance(raw.get("a"), str) and isinstance(raw.get("b"), str):
            return f"link {raw['a']}-{raw['b']}"
        if isinstance(raw.get("name"), str):
            return f"{kind} '{raw['name']}'"
    return f"{kind} #{index + 1}"


def _locate(loc: tuple, data: Any) -> tuple[str | None, tuple]:
    if len(loc) >= 2 and loc[0] in ELEMENTS and isinstance(loc[1], int):
        kind = ELEMENTS[loc[0]][0]
        items = data.get(loc[0])
        raw = items[loc[1]] if isinstance(items, list) and loc[1] < len(items) else None
        return _label(kind, raw, loc[1]), loc[2:]
    if loc[:1] == ("emulation",) and len(loc) > 1:
        return "emulation", loc[1:]
    return None, loc


def _allowed(prefix: tuple) -> str:
    if prefix and prefix[0] in ELEMENTS:
        return ", ".join(ELEMENTS[prefix[0]][1].model_fields)
    if prefix[:1] == ("emulation",):
        return "bw_scale"
    return ", ".join(TopologyFile.model_fields)


def _items(data: dict, key: str) -> list[tuple[int, dict]]:
    items = data.get(key)
    return [(i, x) for i, x in enumerate(items if isinstance(items, list) else [])
            if isinstance(x, dict)]


def _str(raw: dict, key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) and value else None


def cross_checks(data: dict, source: str) -> list[InputError]:
    """References between elements, checked on every well-formed element."""
    out: list[InputError] = []

    def dupes(kind: str, names: list[str]) -> None:
        seen: set[str] = set()
        for n in names:
            if n in seen:
                out.append(InputError(source, f"duplicate {kind} name '{n}'",
                                      element=f"{kind} '{n}'"))
            seen.add(n)

    switches = _items(data, "switches")
    switch_names = [n for _, s in switches if (n := _str(s, "name"))]
    dupes("switch", switch_names)
    dupes("switch dpid", [str(s.get("dpid", i + 1)) for i, s in switches])
    racks = _items(data, "racks")
    for i, r in racks:
        tor = _str(r, "tor")
        if tor and tor not in switch_names:
            out.append(InputError(source, f"ToR switch '{tor}' is not declared in switches",
                                  element=_label("rack", r, i), field="tor"))
    rack_names = [n for _, r in racks if (n := _str(r, "name"))]
    dupes("rack", rack_names)
    hosts = _items(data, "hosts")
    for i, h in hosts:
        rack = _str(h, "rack")
        if rack and rack not in rack_names:
            out.append(InputError(source, f"rack '{rack}' is not declared in racks",
                                  element=_label("host", h, i), field="rack"))
    dupes("host/switch", [n for _, h in hosts if (n := _str(h, "name"))] + switch_names)
    dupes("host ip", [str(h.get("ip") or ipaddress.IPv4Address("10.0.0.0") + i + 1)
                      for i, h in hosts])
    for i, link in _items(data, "links"):
        a, b = _str(link, "a"), _str(link, "b")
        for end in (a, b):
            if end and end not in switch_names:
                out.append(InputError(source, f"dangling link: '{end}' is not a declared "
                                      "switch (hosts link to their rack's ToR implicitly)",
                                      element=_label("link", link, i)))
        if a and a == b:
            out.append(InputError(source, "a link must join two different switches",
                                  element=_label("link", link, i)))
    dupes("link", ["-".join(sorted((_str(l, "a") or "", _str(l, "b") or "")))
                   for _, l in _items(data, "links")])
    return out


def validate_topology_file(data: Any, source: str) -> tuple[TopologyFile | None,
                                                              list[InputError]]:
    """The validated file, or None with every problem found."""
    if not isinstance(data, dict):
        return None, [InputError(source, "a topology must be a YAML mapping")]
    return validate_document(TopologyFile, data, source, _locate, _allowed, cross_checks)


def json_schema() -> dict:
    schema = TopologyFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
