"""Command-line pieces of the policies' options that several commands share (``sluice
simulate``, ``sluice scheduler``, and whatever else builds the sluice policy): one flag
name and one parser for each, so that every command spells and checks them alike."""

from __future__ import annotations

import argparse

from sluice_common import rank_rules


def price_rule(text: str) -> str | None:
    """``--price-priority``'s value: a ranking rule's name, or ``off`` (None)."""
    if text == "off":
        return None
    if text not in rank_rules.names():
        raise argparse.ArgumentTypeError(f"unknown rule {text!r} (known: off, "
                                         f"{', '.join(rank_rules.names())})")
    return text


def add_price_priority_argument(parser: argparse.ArgumentParser, where: str = "") -> None:
    """``--price-priority RULE``, the flag of the policies' ``price_priority``
    (``job_scheduler.core.policies.make_policy``); ``where``: what the command adds to
    its help."""
    parser.add_argument("--price-priority", type=price_rule, default=None, metavar="RULE",
                        help="the sluice policy prices a candidate placement's bandwidth as "
                             "the fabric's strict priority by RULE would give it (the share "
                             "of the class RULE puts the job in), not the fair share; "
                             f"off (default) or one of {', '.join(rank_rules.names())}{where}")
