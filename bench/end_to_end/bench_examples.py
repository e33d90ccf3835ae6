"""Every example file runs what its `# try:` line says, within the time it states and
under 5 minutes (the bar for an example on a laptop-class host with two cores).

    sudo .venv/bin/python -m bench.end_to_end.bench_examples [--json]

Each example under examples/ names its command in a header line
``# try: sluice ... (about N s|min ...)``. This runs each command (``sluice run`` gets
``--out`` in a temporary directory; it needs root and the fabric), prints wall time
against the stated figure, and exits 1 when one fails or takes 5 minutes or more.
tests/unit/project/test_examples.py and tests/fabric/end_to_end/test_examples.py (marked
slow) run the same through :func:`run_example`, but for an example whose run a dedicated
fabric test makes (that file's ``COVERED``); this times every one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import harness
from bench.harness import ROOT

LIMIT_S = 300.0
TRY = re.compile(r"^# try: (sluice .+?)\s+\(about (\d+(?:\.\d+)?) (s|min)\b")


@dataclass(frozen=True)
class Example:
    path: Path
    command: list[str]       # after `sluice`
    stated_s: float

    @property
    def needs_fabric(self) -> bool:
        return self.command[0] in ("run", "demo")


def examples() -> list[Example]:
    out = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        for line in path.read_text().splitlines()[:5]:
            m = TRY.match(line)
            if m:
                stated = float(m.group(2)) * (60 if m.group(3) == "min" else 1)
                out.append(Example(path, m.group(1).split()[1:], stated))
                break
        else:
            raise SystemExit(f"{path}: no '# try: sluice ... (about N s)' line in its header")
    return out


def run_example(example: Example, out_dir: Path) -> tuple[int, float, str]:
    """(exit status, wall seconds, output tail)."""
    argv = [sys.executable, "-m", "sluice", *example.command]
    if example.needs_fabric:
        argv += ["--out", str(out_dir / example.path.stem)]
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          timeout=LIMIT_S + 120, env=dict(os.environ, TERM="dumb"))
    return done.returncode, time.monotonic() - t0, (done.stdout + done.stderr)[-3000:]


def main() -> int:
    ap = harness.parser(__doc__)
    args = ap.parse_args()
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for ex in examples():
            rc, wall, tail = run_example(ex, Path(tmp))
            good = rc == 0 and wall < LIMIT_S
            ok &= good
            rows.append({"file": str(ex.path.relative_to(ROOT)), "command": "sluice " +
                         " ".join(ex.command), "stated_s": ex.stated_s, "wall_s": round(wall, 1),
                         "exit": rc, "ok": good, "load": round(os.getloadavg()[0], 1)})
            print(f"{rows[-1]['file']:<32} {wall:7.1f} s (states about {ex.stated_s:.0f} s) "
                  f"exit {rc} load {rows[-1]['load']} {'OK' if good else 'FAIL'}", flush=True)
            if not good:
                print(tail, file=sys.stderr)
    harness.write_json(args.json, rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
