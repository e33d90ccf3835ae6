"""The benchmarks' one small harness: common arguments, JSON output, figure lines.

Every benchmark runs as a module from the repository root (the package is installed, so
nothing touches ``sys.path``)::

    .venv/bin/python -m bench.scheduler.bench_scheduler_core [--quick] [--json [OUT]]

- ``parser(__doc__, quick=...)``: an ``argparse`` parser with ``--json [OUT]`` (the
  figures as JSON to OUT, or to stdout when OUT is left out) and, where the benchmark has
  a short form, ``--quick``;
- ``figure(name, value, unit, baseline=..., baseline_unit=...)``: prints one figure line
  ``FIGURE name: value unit (baseline b unit, ratio r)`` and returns it as a dict;
- ``write_json(dest, data)``: the ``--json`` output.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (the benchmarks' working directory for the processes they start)."""


def parser(doc: str | None, quick: str | None = None, json_out: bool = True
           ) -> argparse.ArgumentParser:
    """An argument parser described by the first line of ``doc``; ``quick`` is the help of
    ``--quick`` (left out when None); ``json_out`` adds ``--json [OUT]``."""
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    if json_out:
        ap.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT",
                        help="write the figures as JSON to OUT (stdout without OUT)")
    if quick is not None:
        ap.add_argument("--quick", action="store_true", help=quick)
    return ap


def _fmt(x: float) -> str:
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) >= 1000):
        return f"{int(x):,}"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def figure(name: str, value: float, unit: str = "", baseline: float | None = None,
           baseline_unit: str | None = None, note: str = "") -> dict:
    """Print ``FIGURE name: value unit (baseline b unit, ratio value/b) note`` and return
    the same as a dict (name, value, unit, baseline, ratio, note)."""
    ratio = None
    line = f"FIGURE {name}: {_fmt(value)}{' ' + unit if unit else ''}"
    if baseline is not None:
        bunit = unit if baseline_unit is None else baseline_unit
        ratio = value / baseline if baseline else math.inf
        line += f" (baseline {_fmt(baseline)}{' ' + bunit if bunit else ''}, ratio {ratio:.3g})"
    if note:
        line += f" {note}"
    print(line, flush=True)
    return {"name": name, "value": value, "unit": unit, "baseline": baseline,
            "ratio": ratio, "note": note}


def write_json(dest: str | None, data) -> None:
    """``--json`` output: nothing when ``dest`` is None, stdout for "-", else the file
    (the calibrations' writer: one format for benchmarks and calibrations)."""
    from mininet_tests.calibration.report import write_json as calibration_write_json

    calibration_write_json(dest, data)
