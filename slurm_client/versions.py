"""Which Slurm sluice talks to, and which JSON layout its commands print (pure).

Slurm's ``--json`` output is written by a versioned data parser, and its layout changed
between releases (facts read from Slurm's sources, src/sinfo/sinfo.c and
src/plugins/data_parser/v0.0.*/parsers.c at each release's tag):

=======  ==============  ================================================================
Slurm    data parser     ``sinfo --json``
=======  ==============  ================================================================
22.05    openapi/v0.0.38 ``{"meta": {"plugin", "Slurm": {"version": {major: 22, ...}}},
                         "nodes": [{name, address, state: "mixed", state_flags: [...],
                         gres, gres_used, cpus, alloc_cpus, real_memory, ...}]}``
23.02    v0.0.39         ``{"meta": {"plugins", "Slurm": {...}}, "sinfo": [GROUP, ...]}``
23.11    v0.0.40         ``{"sinfo": [GROUP], "meta": {"plugin": {"data_parser": ...},
                         "slurm": {"version": {"major": "23", ...}, "release"}}}``
24.05    v0.0.41         as 23.11
24.11    v0.0.42         as 23.11 (a GROUP also has ``resource_spec``)
=======  ==============  ================================================================

From 23.02 ``sinfo --json`` lists *groups* of nodes (one per partition and state, like
``sinfo``'s lines): ``{"node": {"state": ["IDLE", "DRAIN"]}, "nodes": {"nodes": [names],
"addresses": [...], "hostnames": [...]}, "gres": {"total", "used"}, "cpus": {"total",
"allocated"}, "memory": {"maximum", "allocated"}, "partition": {"name"}, "reason":
{"description"}}``; ``sinfo --json --Node`` makes each group one node of one partition.

The version is read once at start (``sinfo --version``) and a release sluice has not
been taught is refused then, naming it, rather than misread later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class UnsupportedSlurm(ValueError):
    """A Slurm release whose JSON layout sluice does not know."""

    def __init__(self, version: "SlurmVersion | str", why: str = ""):
        self.version = str(version)
        known = ", ".join(f"{a}.{b:02d}" for a, b in sorted(LAYOUTS))
        super().__init__(f"Slurm {self.version} is not supported{why} (sluice reads the "
                         f"JSON of Slurm {known})")


@dataclass(frozen=True, order=True)
class SlurmVersion:
    major: int
    minor: int
    micro: int = 0

    @property
    def series(self) -> tuple[int, int]:
        return self.major, self.minor

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"


@dataclass(frozen=True)
class Layout:
    data_parser: str        # the data parser ``--json`` uses by default in this release
    grouped: bool           # sinfo --json lists node groups ("sinfo"), not nodes ("nodes")


LAYOUTS: dict[tuple[int, int], Layout] = {
    (22, 5): Layout("v0.0.38", grouped=False),
    (23, 2): Layout("v0.0.39", grouped=True),
    (23, 11): Layout("v0.0.40", grouped=True),
    (24, 5): Layout("v0.0.41", grouped=True),
    (24, 11): Layout("v0.0.42", grouped=True),
}

_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version_text(text: str) -> SlurmVersion:
    """``sinfo --version``: ``slurm 22.05.8`` (Debian: ``slurm-wlm 22.05.8``)."""
    m = _RELEASE.search(text or "")
    if not m:
        raise ValueError(f"no Slurm version in {text.strip()[:80]!r}")
    return SlurmVersion(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def version_from_meta(meta: object) -> SlurmVersion:
    """The release a ``--json`` document says it comes from: ``meta.Slurm.version``
    (22.05, 23.02: numbers) or ``meta.slurm.version`` (23.11 on: strings)."""
    if not isinstance(meta, dict):
        raise ValueError("no 'meta' object")
    slurm = meta.get("slurm") or meta.get("Slurm")
    version = slurm.get("version") if isinstance(slurm, dict) else None
    if isinstance(version, dict):
        try:
            return SlurmVersion(int(version["major"]), int(version["minor"]),
                                int(version.get("micro") or 0))
        except (KeyError, TypeError, ValueError):
            pass
    release = slurm.get("release") if isinstance(slurm, dict) else None
    if isinstance(release, str):
        return parse_version_text(release)
    raise ValueError("'meta' names no Slurm version")


def layout_for(version: SlurmVersion) -> Layout:
    """The layout of ``version``'s JSON; UnsupportedSlurm for a release sluice does not know."""
    layout = LAYOUTS.get(version.series)
    if layout is None:
        raise UnsupportedSlurm(version)
    return layout


def sinfo_argv(version: SlurmVersion | None) -> list[str]:
    """``sinfo --json``; from 23.02 with ``--Node``, so that each group is one node
    (22.05's JSON lists nodes anyway, and ignores ``--Node``)."""
    if version is None or not layout_for(version).grouped:
        return ["sinfo", "--json"]
    return ["sinfo", "--json", "--Node"]
