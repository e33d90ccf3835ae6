"""Run every benchmark under bench/ in turn and print its figures (`make bench`).

Each bench_*.py prints its own figures, including a baseline measured in the same run;
bench/RESULTS.md records the latest figures and the commands that produced them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def main() -> int:
    failed = []
    for script in sorted(BENCH_DIR.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        start = time.monotonic()
        rc = subprocess.call([sys.executable, str(script)], cwd=BENCH_DIR.parent)
        print(f"=== {script.name}: exit {rc} in {time.monotonic() - start:.0f} s ===", flush=True)
        if rc:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
