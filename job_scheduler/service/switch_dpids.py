"""``--switch-dpids FILE``: each fabric switch's OpenFlow datapath id, for a topology
written from Slurm. Slurm's topology.conf names the switches but knows nothing of
OpenFlow, and the controller recognises a switch only by the datapath id it announces, so
a topology whose ids are guesses leaves every real switch unknown. The file maps each
topology.conf switch name to its id, in any of the spellings switches print::

    tor1: 1                          # an integer
    tor2: 0x2                        # hexadecimal
    spine1: "00:00:00:00:00:00:00:0a"   # ovs-ofctl show's colon form (quote it in YAML)

:func:`parse_switch_dpids` is pure; :func:`load_switch_dpids` reads the file.
"""

from __future__ import annotations

from pathlib import Path

from sluice_common.errors import InputError, raise_all

MAX_DPID = 2 ** 64 - 1


def parse_dpid(value: object) -> int:
    """One datapath id from an integer, ``0x..`` or the colon form; ValueError saying why."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a datapath id")
    if isinstance(value, int):
        dpid = value
    elif isinstance(value, str) and value.strip():
        text = value.strip().lower()
        try:
            if ":" in text:
                parts = text.split(":")
                if len(parts) != 8 or any(len(p) != 2 for p in parts):
                    raise ValueError
                dpid = int("".join(parts), 16)
            else:
                dpid = int(text, 16 if text.startswith("0x") else 10)
        except ValueError:
            raise ValueError(f"{value!r} is not a datapath id (an integer, 0x.. or "
                             "eight colon-separated hex bytes)") from None
    else:
        raise ValueError(f"{value!r} is not a datapath id")
    if not 1 <= dpid <= MAX_DPID:
        raise ValueError(f"datapath id {value!r} is outside 1..2^64-1")
    return dpid


def parse_switch_dpids(data: object, source: str) -> dict[str, int]:
    """{switch: dpid}; every bad entry at once (InputError naming the switch)."""
    if not isinstance(data, dict) or not data:
        raise InputError(source, "must be a YAML mapping of switch name to OpenFlow datapath "
                         f"id (tor1: 1), got {type(data).__name__}")
    out: dict[str, int] = {}
    errors: list[InputError] = []
    for switch, value in data.items():
        if not isinstance(switch, str) or not switch:
            errors.append(InputError(source, "a switch name must be a non-empty string",
                                     field=str(switch)))
            continue
        try:
            out[switch] = parse_dpid(value)
        except ValueError as err:
            errors.append(InputError(source, str(err), field=switch))
    owner: dict[int, str] = {}
    for switch, dpid in out.items():
        if dpid in owner:
            errors.append(InputError(source, f"datapath id {dpid:#x} is also "
                                     f"{owner[dpid]}'s", field=switch))
        owner.setdefault(dpid, switch)
    raise_all(errors)
    return out


def load_switch_dpids(path: str | Path | None) -> dict[str, int] | None:
    """The file's map, None without one; InputError (exit 2) naming the file."""
    if path is None:
        return None
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(str(path), f"cannot read: {err.strerror or err}")
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise InputError(str(path), f"not valid YAML: {' '.join(str(err).split())}")
    return parse_switch_dpids(data, str(path))


def assign_dpids(switch_names: list[str], dpids: dict[str, int] | None,
                 source: str) -> dict[str, int]:
    """Each switch's id: from ``dpids`` (which must name every switch and no other), else
    numbered 1..N in order."""
    if dpids is None:
        return {name: k + 1 for k, name in enumerate(switch_names)}
    missing = [s for s in switch_names if s not in dpids]
    unknown = sorted(set(dpids) - set(switch_names))
    errors = []
    if missing:
        errors.append(InputError(source, f"no datapath id for switch(es) {', '.join(missing)} "
                                 f"of topology.conf", field="switches"))
    if unknown:
        errors.append(InputError(source, f"switch(es) {', '.join(unknown)} are not in "
                                 f"topology.conf (its switches: {', '.join(switch_names)})",
                                 field="switches"))
    raise_all(errors)
    return {name: dpids[name] for name in switch_names}
