"""``python -m end_to_end.demo_bounds_cli RUN1 RUN2 RUN3``: the project's bounds on three
``sluice demo`` runs of one seed (``end_to_end.demo_bounds``), one verdict a line, each
``met``, ``NOT met`` or ``cannot judge``. Each argument is a run's ``comparison.json`` or
its directory. Exit 0 when every bound is met; 1 when one is not met or cannot be judged
(a missing or non-finite figure, runs of more than one seed, another number of runs than
three); 2 on a file that cannot be read."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from end_to_end.demo_bounds import verdicts


def load(given: str) -> dict:
    """One run's comparison (ValueError/OSError naming the file on one that is not)."""
    path = Path(given) / "comparison.json" if Path(given).is_dir() else Path(given)
    try:
        data = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("arms"), dict):
        raise ValueError(f"{path}: not a demo comparison (no 'arms' object)")
    return data


def report(cmps: list[dict]) -> tuple[str, bool]:
    """The printed verdicts, and whether every bound is met."""
    found = verdicts(cmps)
    lines = [f"{len(cmps)} run(s), seeds {sorted({c.get('seed') for c in cmps}, key=str)}"]
    lines += [v.line() for v in found]
    return "\n".join(lines), all(v.met for v in found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m end_to_end.demo_bounds_cli",
                                     description="The project's bounds on sluice demo runs.")
    parser.add_argument("comparisons", nargs="+",
                        help="each run's comparison.json (or its directory): three runs of one seed")
    args = parser.parse_args(argv)
    try:
        cmps = [load(given) for given in args.comparisons]
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    text, ok = report(cmps)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
