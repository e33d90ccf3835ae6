"""sluice_common/registry.py: the named registry the open axes share."""

from dataclasses import dataclass

import pytest

from sluice_common.registry import Registry


@dataclass(frozen=True)
class Thing:
    name: str
    summary: str


def test_registration_order_replacement_lookup_and_help():
    reg: Registry[Thing] = Registry("thing")
    a, b = reg.register(Thing("a", "first")), reg.register(Thing("b", "second"))
    assert reg.names() == ("a", "b") and reg.get("b") is b and "a" in reg
    reg.register(Thing("a", "again"))                 # same name: replaced, place kept
    assert reg.names() == ("a", "b") and reg.get("a") != a
    assert reg.help_text() == "a: again; b: second"
    assert [t.name for t in reg] == ["a", "b"]
    with pytest.raises(ValueError, match=r"thing must be one of a, b, got 'c'"):
        reg.get("c")
    reg.unregister("a")
    reg.unregister("a")                               # twice: nothing more to do
    assert reg.names() == ("b",) and "a" not in reg
