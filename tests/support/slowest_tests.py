"""The slowest tests over several pytest runs, from their JUnit XML reports.

`make test` runs the unit tree in parallel and the fabric tree serially, two pytest runs;
pytest's own ``--durations`` would print one list per run. This prints one list over
both: ``python tests/support/slowest_tests.py 25 unit.xml fabric.xml``. A test's time is
the report's (setup, call and teardown together). A report that is missing (its run died
before writing it) is named and skipped, so the list of the other run still prints.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def node_id(classname: str, name: str, is_file: Callable[[str], bool]) -> str:
    """pytest's node id (``tests/x/test_y.py::TestC::test_z[p]``) from a report's
    ``classname`` (``tests.x.test_y.TestC``) and ``name``: the longest dotted prefix that
    names a file is the module, the rest its classes. ``classname`` as it is when none
    does."""
    parts = classname.split(".") if classname else []
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if is_file(path):
            return "::".join([path, *parts[cut:], name])
    return f"{classname}::{name}" if classname else name


def cases(xml_text: str) -> list[tuple[str, str, float]]:
    """(classname, name, seconds) of every test case of one JUnit XML report."""
    root = ET.fromstring(xml_text)
    return [(case.get("classname", ""), case.get("name", ""), float(case.get("time") or 0))
            for case in root.iter("testcase")]


def slowest(all_cases: Iterable[tuple[str, float]], count: int) -> list[tuple[str, float]]:
    """The ``count`` slowest (test, seconds), slowest first; ties by test id."""
    return sorted(all_cases, key=lambda c: (-c[1], c[0]))[:count]


def report(count: int, reports: list[Path], root: Path = REPO) -> str:
    timed, missing = [], []
    for path in reports:
        if not path.is_file():
            missing.append(str(path))
            continue
        for classname, name, seconds in cases(path.read_text()):
            timed.append((node_id(classname, name, lambda p: (root / p).is_file()), seconds))
    lines = [f"{count} slowest tests of {len(timed)} (setup + call + teardown), "
             f"from {', '.join(str(p) for p in reports if str(p) not in missing) or 'no report'}:"]
    lines += [f"{seconds:9.2f}s  {test}" for test, seconds in slowest(timed, count)]
    lines += [f"no report at {path} (its run wrote none)" for path in missing]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print("usage: slowest_tests.py COUNT REPORT.xml [REPORT.xml ...]", file=sys.stderr)
        return 2
    print(report(int(argv[0]), [Path(a) for a in argv[1:]]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
