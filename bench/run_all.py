"""Run every benchmark under bench/ in turn and print its figures (`make bench`).

    .venv/bin/python -m bench.run_all [AREA ...]      # e.g. scheduler controller

Each ``bench/<area>/bench_*.py`` runs as a module (``python -m bench.<area>.<name>``)
from the repository root and prints its own figures, with a baseline measured in the same
run (bench/harness.py); bench/RESULTS.md records the latest figures and their commands.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def scripts(areas: list[str]) -> list[Path]:
    """Every bench_*.py of the given areas (all areas when none), sorted."""
    found = sorted(BENCH_DIR.glob("*/bench_*.py"))
    return [s for s in found if not areas or s.parent.name in areas]


def main(argv: list[str] | None = None) -> int:
    areas = sys.argv[1:] if argv is None else argv
    failed = []
    for script in scripts(areas):
        module = f"bench.{script.parent.name}.{script.stem}"
        print(f"\n=== {module} ===", flush=True)
        start = time.monotonic()
        rc = subprocess.call([sys.executable, "-m", module], cwd=BENCH_DIR.parent)
        print(f"=== {module}: exit {rc} in {time.monotonic() - start:.0f} s ===", flush=True)
        if rc:
            failed.append(module)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
