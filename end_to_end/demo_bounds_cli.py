"""``python -m end_to_end.demo_bounds_cli RUN/comparison.json ...``: issue 47's bounds on
``sluice demo`` runs (``end_to_end.demo_bounds``), one verdict a line. Exit 0 when every
bound is met, 1 when one is not, 2 on a file that cannot be read."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from end_to_end.demo_bounds import verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m end_to_end.demo_bounds_cli",
                                     description="Issue 47's bounds on sluice demo runs.")
    parser.add_argument("comparisons", nargs="+", help="each run's comparison.json (or its directory)")
    args = parser.parse_args(argv)
    cmps = []
    for given in args.comparisons:
        path = Path(given) / "comparison.json" if Path(given).is_dir() else Path(given)
        try:
            cmps.append(json.loads(path.read_text()))
        except (OSError, ValueError) as err:
            print(f"error: {path}: {err}", file=sys.stderr)
            return 2
    print(f"{len(cmps)} run(s), seeds {sorted({c.get('seed') for c in cmps})}")
    found = verdicts(cmps)
    for v in found:
        print(v.line())
    return 0 if all(v.met for v in found) else 1


if __name__ == "__main__":
    sys.exit(main())
