"""Lines of end_to_end/ + job_scheduler/ against a base commit, and which commits'
subject labels wrote the lines there now (git blame).

    .venv/bin/python -m bench.scheduler.engine_lines [--base REV] [--json [OUT]]

The base defaults to be04916 (7,933 lines). A line counts for the number that starts
the subject of the commit that last wrote it (see ``ISSUE``); lines from commits whose
subject starts with no such number, or with the restructuring's own, and the base's own
lines count as "restructure or base", so the like-for-like figure is the restructured
code of the base without the features added since, given against the base. Needs a git
checkout with that history.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter

from bench import harness

BASE = "be04916"
FOLDERS = ("end_to_end", "job_scheduler")
ISSUE = re.compile(r"^issues? (\d+)")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=harness.ROOT, check=True, text=True,
                          capture_output=True).stdout


def python_files(rev: str | None = None) -> list[str]:
    out = _git("ls-tree", "-r", "--name-only", rev, *FOLDERS) if rev else \
        _git("ls-files", *FOLDERS)
    return [f for f in out.split() if f.endswith(".py")]


def lines_at(rev: str) -> int:
    return sum(len(_git("show", f"{rev}:{f}").splitlines()) for f in python_files(rev))


def lines_by_issue(base: str) -> Counter:
    """Subject number (or "restructure or base") -> lines of today's files it last wrote."""
    count: Counter = Counter()
    for path in python_files():
        subject, boundary = None, False
        for line in _git("blame", "--line-porcelain", f"{base}..", "--", path).splitlines():
            if re.match(r"^[0-9a-f]{40} ", line):
                subject, boundary = None, False
            elif line == "boundary":
                boundary = True
            elif line.startswith("summary "):
                subject = line[len("summary "):]
            elif line.startswith("\t"):
                m = None if boundary or subject is None else ISSUE.match(subject)
                count[m.group(1) if m and m.group(1) != "29" else "restructure or base"] += 1
    return count


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--base", default=BASE, help=f"the base commit (default {BASE})")
    args = ap.parse_args()
    base = lines_at(args.base)
    by = lines_by_issue(args.base)
    now = sum(by.values())
    own = by["restructure or base"]
    figures = [harness.figure("end_to_end + job_scheduler lines now", now, "lines", base),
               harness.figure("lines other issues' commits wrote (features since the base)",
                              now - own, "lines",
                              note=", ".join(f"issue {k}: {v}" for k, v in sorted(by.items())
                                             if k != "restructure or base")),
               harness.figure("like for like: the base as restructured, without them", own,
                              "lines", base)]
    harness.write_json(args.json, {"figures": figures, "base": args.base,
                                   "by_issue": dict(by)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
