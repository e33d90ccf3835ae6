"""``sluice fabric check|up`` turn their namespace into :class:`FabricOptions` once; its
defaults are the parser's (``up`` has none of the check's flags, and keeps their defaults)."""

from __future__ import annotations

import dataclasses

import pytest

from mininet_tests.cli import DEFAULT_API, MIN_RATIO, FabricOptions, fabric_options
from mininet_tests.priority_check import DEFAULT_BOTTLENECK_MBIT
from sluice.cli import build_parser


def _options(*argv: str) -> FabricOptions:
    parser, _, _, rest = build_parser("fabric", list(argv))
    return fabric_options(parser.parse_args(rest))


@pytest.mark.parametrize("action", ["check", "up"])
def test_the_defaults_are_the_parsers(action):
    opts = _options(action)
    assert opts == FabricOptions(action=action)
    assert (opts.topology, opts.levels, opts.wait_connected, opts.controller_api,
            opts.seconds, opts.min_ratio, opts.bottleneck_mbit) == (
        "two-rack", 8, 30.0, DEFAULT_API, 8.0, MIN_RATIO, DEFAULT_BOTTLENECK_MBIT)


def test_every_check_flag_lands_in_its_field():
    opts = _options("check", "--topology", "t.yaml", "--controller", "127.0.0.1:6653",
                    "--levels", "4", "--wait-connected", "5", "--controller-api", "none",
                    "--json", "--seconds", "3", "--min-ratio", "2", "--single-flow",
                    "--bottleneck-mbit", "0")
    assert opts == FabricOptions(action="check", topology="t.yaml", controller="127.0.0.1:6653",
                                 levels=4, wait_connected=5.0, controller_api="none", json=True,
                                 seconds=3.0, min_ratio=2.0, single_flow=True, bottleneck_mbit=0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.levels = 2
