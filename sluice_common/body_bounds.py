"""Bounds on a document's shape, checked before any recursive parser builds it.

A request body or a job file passes through a parser that builds nested objects by
recursion (libyaml's composer in C, ``json.loads``, pydantic-core), and its numbers
through ``int(str)``; a body of 50,000 ``[`` overflows the C stack of such a parser and
takes the whole process down (a segmentation fault is no exception a service can catch).
So every body is first walked by a scanner that keeps its own stack and never recurses
(YAML: the parser's event stream, a state machine in libyaml and in PyYAML alike; JSON:
a tokenizer), and refused with :class:`BoundsError` naming the bound it passed:

- depth: collections nested at most ``depth`` deep (a YAML alias counts as the depth of
  the node it names, where it stands),
- values: at most ``values`` values in all, YAML aliases expanded (billion laughs),
- strings: no scalar longer than ``string_chars`` characters,
- numbers: no number written with more than ``number_chars`` characters (Python's
  ``int(str)`` is quadratic in them) and no non-finite number (NaN, Infinity, 1e999).

The limits are the same for both services and for job files read from disk
(:data:`LIMITS`); docs/api.md and the services' OpenAPI documents state them.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import asdict, dataclass

import yaml


@dataclass(frozen=True)
class Bounds:
    depth: int = 32
    values: int = 1_000_000
    string_chars: int = 4096
    number_chars: int = 100

    def describe(self) -> str:
        return (f"collections nested at most {self.depth} deep, at most {self.values:,} "
                f"values (YAML aliases expanded), strings of at most {self.string_chars} "
                f"characters, numbers of at most {self.number_chars} characters and finite")

    def openapi_extension(self) -> dict:
        """``x-sluice-body-bounds`` of a request body in the OpenAPI documents."""
        return asdict(self)


LIMITS = Bounds()


class BoundsError(ValueError):
    """A document over one of its bounds: ``reason`` says which, in words."""

    def __init__(self, reason: str, bound: str):
        super().__init__(reason)
        self.reason, self.bound = reason, bound


def _number(text: str, bounds: Bounds) -> None:
    if len(text) > bounds.number_chars:
        raise BoundsError(f"a number of {len(text)} characters (at most "
                          f"{bounds.number_chars})", "number_chars")
    try:
        # YAML writes them .inf, -.Inf, .NaN
        finite = math.isfinite(float(text.replace("_", "").replace(".", "", 1)
                                     if text.lower().lstrip("+-") in (".inf", ".nan")
                                     else text.replace("_", "")))
    except ValueError:
        return                   # not a number after all (the parser decides)
    if not finite:
        raise BoundsError(f"a non-finite number ({text[:20]}): only finite numbers",
                          "number_chars")


def _string(length: int, bounds: Bounds) -> None:
    if length > bounds.string_chars:
        raise BoundsError(f"a string of {length} characters (at most "
                          f"{bounds.string_chars})", "string_chars")


def _too_deep(bounds: Bounds) -> BoundsError:
    return BoundsError(f"collections nested more than {bounds.depth} deep", "depth")


def _too_many(bounds: Bounds) -> BoundsError:
    return BoundsError(f"more than {bounds.values:,} values (YAML aliases expanded)",
                       "values")


# ---- JSON ------------------------------------------------------------------------------

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_NOT_A_BRACKET = re.compile(rb"[^\[\]{}]+")
_JSON_LONG_NUMBER = rb"[-+0-9.eE]{%d,}"
# what may stand for a non-finite number: Python's json reads NaN and Infinity, and
# 1e999 is a float too large to be finite
_JSON_NONFINITE = re.compile(rb"NaN|Infinity|[-0-9.]+[eE][-+]?[0-9]{3,}")
_NESTING = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def check_json(body: bytes, bounds: Bounds = LIMITS) -> None:
    """BoundsError when the JSON text ``body`` passes a bound. Text that is not JSON is
    let through: the parser refuses it (this scan only keeps it from recursing). Every
    step is one pass of a regular expression or a C-level loop: a 64 KB body costs
    at most ~10 ms of the event loop, however it is made (a progress report: 10 us)."""
    strings = _JSON_STRING.findall(body)
    if strings and max(map(len, strings)) - 2 > bounds.string_chars:
        _string(max(map(len, strings)) - 2, bounds)
    rest = _JSON_STRING.sub(b'""', body)
    brackets = _NOT_A_BRACKET.sub(b"", rest)
    if len(brackets) > 2 * bounds.depth:
        levels = itertools.accumulate(map(int.__sub__, brackets.translate(_NESTING),
                                          itertools.repeat(1)))
        if max(levels) > bounds.depth:
            raise _too_deep(bounds)
    # every value but the first is after a comma or opens a collection
    if rest.count(b",") + rest.count(b"[") + rest.count(b"{") + 1 > bounds.values:
        raise _too_many(bounds)
    long = re.search(_JSON_LONG_NUMBER % (bounds.number_chars + 1), rest)
    if long:
        _number(long.group().decode("latin-1"), bounds)
    for m in _JSON_NONFINITE.finditer(rest):
        _number(m.group().decode("latin-1"), bounds)


# ---- YAML ------------------------------------------------------------------------------

_NUMBER_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}


class YamlEventBounds:
    """Feed it a YAML parser's events (:meth:`event`); it raises BoundsError once the
    document passes a bound. It keeps, per open collection, ``[values, items, anchor,
    height, is_mapping]``, and per anchor what an alias to it stands for (values, items, height)."""

    def __init__(self, loader, bounds: Bounds = LIMITS):
        self.loader, self.bounds = loader, bounds
        self.anchors: dict[str, tuple[int, int, int]] = {}
        self.stack: list[list] = []
        self.expanded = 0

    def event(self, event) -> tuple[int, int] | None:
        """Check one event; for a node that ended here (a scalar, an alias, a closed
        collection), its (values, items) as counted into its parent."""
        if isinstance(event, yaml.CollectionStartEvent):
            if len(self.stack) >= self.bounds.depth:
                raise _too_deep(self.bounds)
            self.stack.append([1, 0, event.anchor, 0,
                               isinstance(event, yaml.MappingStartEvent)])
            return None
        if isinstance(event, yaml.CollectionEndEvent):
            values, items, anchor, height, _ = self.stack.pop()
            if anchor:
                self.anchors[anchor] = (values, items, height + 1)
            return self._closed(values, 1, height + 1), items
        if isinstance(event, yaml.ScalarEvent):
            self._scalar(event)
            if event.anchor:
                self.anchors[event.anchor] = (1, 0, 0)
            return self._closed(1, 1, 0), 0
        if isinstance(event, yaml.AliasEvent):
            # an alias to a node still open (recursive) counts once
            values, items, height = self.anchors.get(event.anchor, (1, 0, 0))
            return self._closed(values, values, height), items
        return None

    def _closed(self, values: int, new: int, height: int) -> int:
        """A node of ``values`` values (``new`` not counted yet), ``height`` levels of
        collections deep, ended in the innermost open collection."""
        if len(self.stack) + height > self.bounds.depth:
            raise _too_deep(self.bounds)
        self.expanded += new
        if self.expanded > self.bounds.values:
            raise _too_many(self.bounds)
        if self.stack:
            parent = self.stack[-1]
            parent[0] += values
            parent[1] += 1
            parent[3] = max(parent[3], height)
        return values

    def _scalar(self, event) -> None:
        _string(len(event.value), self.bounds)
        if event.implicit[0] and event.style is None:        # plain: the resolver's type
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        else:
            tag = event.tag
            if tag is not None and tag.startswith("!!"):
                tag = "tag:yaml.org,2002:" + tag[2:]
        if tag in _NUMBER_TAGS:
            _number(event.value, self.bounds)

