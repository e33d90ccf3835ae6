"""The demo's four arms at scale on 1:1, 2:1 and 4:1 fabrics: ``sluice whatif`` per cell.

Cells: the Philly trace's first ``--jobs`` jobs by submission (the window ``sluice whatif
--jobs N`` keeps, named below by its first and last job's line in the CSV) at offered
loads 0.7 and 0.9 on ``cluster-2k``, ``cluster-2k-2to1`` and ``cluster-2k-4to1``; and the
Tiresias 60-job trace at 0.7 and 0.9 on ``two-rack-64``. Each cell is one ``sluice whatif
... --arms a,b,c,d --json`` process. Prints a markdown table (per cell each arm's average
and p95 JCT, b vs a and d vs c in average JCT, cross-rack share and p99 uplink
utilisation), one progress line per cell on stderr, and writes every cell's command and
raw JSON to ``--out``. A cell that fails (exit status, output that is not the expected
JSON) is reported on stderr, kept in ``--out`` with its error, and the script exits 1
without printing a table: a table is printed only when every cell came back.

    .venv/bin/python -m bench.scheduler.whatif_table [--quick] [--jobs N] [--out FILE]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from bench import harness

ARMS = ("a", "b", "c", "d")
FIELDS = ("avg_jct_s", "p95_jct_s", "makespan_s", "gpu_util", "cross_rack_share",
          "uplink_util_p99")
LOADS = (0.7, 0.9)
PHILLY_FABRICS = ("cluster-2k", "cluster-2k-2to1", "cluster-2k-4to1")
TIRESIAS_FABRIC = "two-rack-64"
PHILLY_JOBS = 20_000
QUICK_JOBS = 2_000
TIRESIAS_JOBS = 60
CELL_TIMEOUT_S = 6 * 3600


@dataclass(frozen=True)
class Cell:
    trace: str            # "philly" | "tiresias": the trace format as well
    path: str
    topology: str
    load: float
    jobs: int | None      # None: the whole trace

    @property
    def label(self) -> str:
        size = f"{self.jobs:,} jobs" if self.jobs else "whole trace"
        return f"{self.trace} ({size}) on {self.topology} at load {self.load:g}"


class CellFailed(Exception):
    """A cell whose process failed or whose output is not the table's JSON."""


def cells(philly: str, tiresias: str, philly_jobs: int) -> list[Cell]:
    """Every cell of the table, in its row order."""
    out = [Cell("philly", philly, fabric, load, philly_jobs)
           for load in LOADS for fabric in PHILLY_FABRICS]
    out += [Cell("tiresias", tiresias, TIRESIAS_FABRIC, load, None) for load in LOADS]
    return out


def command(cell: Cell, python: str = sys.executable) -> list[str]:
    """The ``sluice whatif`` command line of one cell."""
    argv = [python, "-m", "sluice", "whatif", "--trace", cell.path, "--trace-format",
            cell.trace, "--topology", cell.topology, "--load", f"{cell.load:g}"]
    if cell.jobs is not None:
        argv += ["--jobs", str(cell.jobs)]
    return argv + ["--arms", ",".join(ARMS), "--json"]


def result_problems(result, cell: Cell) -> list[str]:
    """What makes a cell's JSON unfit for the table (empty when fit)."""
    if not isinstance(result, dict):
        return ["the output is not a JSON object"]
    problems = []
    jobs = result.get("jobs")
    count = len(jobs) if isinstance(jobs, list) else jobs
    want = cell.jobs if cell.jobs is not None else (TIRESIAS_JOBS if cell.trace == "tiresias"
                                                    else None)
    if isinstance(count, int) and want is not None and count != want:
        problems.append(f"ran {count} jobs, the cell asked {want}")
    topology = result.get("topology")
    if isinstance(topology, str) and topology != cell.topology:
        problems.append(f"ran on '{topology}', the cell asked '{cell.topology}'")
    arms = result.get("arms")
    if not isinstance(arms, dict):
        return problems + ["no 'arms' object"]
    for arm in ARMS:
        got = arms.get(arm)
        if not isinstance(got, dict):
            problems.append(f"arm {arm} missing")
            continue
        for key in FIELDS:
            value = got.get(key)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                problems.append(f"arm {arm}: '{key}' missing or not a number")
    return problems


def parse_output(cell: Cell, returncode: int, stdout: str, stderr: str) -> dict:
    """The cell's JSON, or :class:`CellFailed` saying why not."""
    if returncode != 0:
        tail = " | ".join(stderr.strip().splitlines()[-3:]) or "no stderr"
        raise CellFailed(f"exit status {returncode}: {tail}")
    try:
        result = json.loads(stdout)
    except json.JSONDecodeError as err:
        raise CellFailed(f"output is not JSON ({err.msg} at line {err.lineno})")
    problems = result_problems(result, cell)
    if problems:
        raise CellFailed("; ".join(problems))
    return result


def change_pct(new: float, old: float) -> float:
    return 100.0 * (new / old - 1.0) if old else float("nan")


def _per_arm(arms: dict, key: str, fmt: str) -> str:
    return " / ".join(format(arms[a][key], fmt) for a in ARMS)


HEADER = ("| trace | fabric | load | avg JCT s (a / b / c / d) | p95 JCT s (a / b / c / d) "
          "| b vs a | d vs c | cross-rack share (a / b / c / d) | uplink p99 (a / b / c / d) |")


def table(rows: list[tuple[Cell, dict]]) -> str:
    """The markdown table of every cell's result (b vs a, d vs c: average JCT)."""
    lines = [HEADER, "|" + " --- |" * HEADER.count(" | ") + " --- |"]
    for cell, result in rows:
        arms = result["arms"]
        b_a = change_pct(arms["b"]["avg_jct_s"], arms["a"]["avg_jct_s"])
        d_c = change_pct(arms["d"]["avg_jct_s"], arms["c"]["avg_jct_s"])
        lines.append(f"| {cell.trace} | {cell.topology} | {cell.load:g} "
                     f"| {_per_arm(arms, 'avg_jct_s', ',.0f')} "
                     f"| {_per_arm(arms, 'p95_jct_s', ',.0f')} | {b_a:+.1f} % | {d_c:+.1f} % "
                     f"| {_per_arm(arms, 'cross_rack_share', '.2f')} "
                     f"| {_per_arm(arms, 'uplink_util_p99', '.2f')} |")
    return "\n".join(lines)


def window_label(path: str, jobs: list) -> str:
    """Name a Philly window by its first and last job: their CSV lines and submit times
    (``jobs``: the JobSpecs, in arrival order, the window holds)."""
    first, last = jobs[0], jobs[-1]
    span_h = (last.arrival - first.arrival) / 3600.0
    return (f"Philly window: the first {len(jobs):,} jobs by submission in {Path(path).name}, "
            f"from line {first.extra['line']} to line {last.extra['line']} "
            f"({span_h:,.1f} h of submissions)")


def run_cells(todo: list[Cell], run: Callable[[list[str]], tuple[int, str, str]],
              log: Callable[[str], None]) -> list[dict]:
    """Run every cell (on after a failure, so that one run reports every failing cell);
    one record per cell: the cell, its command, its result or its error, its wall time."""
    records = []
    for i, cell in enumerate(todo, 1):
        argv = command(cell)
        started = time.monotonic()
        record = {"cell": asdict(cell), "command": argv, "result": None, "error": None}
        try:
            record["result"] = parse_output(cell, *run(argv))
        except CellFailed as err:
            record["error"] = str(err)
        except subprocess.TimeoutExpired:
            record["error"] = f"no answer within {CELL_TIMEOUT_S} s"
        record["wall_s"] = round(time.monotonic() - started, 1)
        if record["error"]:
            log(f"[{i}/{len(todo)}] {cell.label}: FAILED after {record['wall_s']} s: "
                f"{record['error']}")
        else:
            arms = record["result"]["arms"]
            log(f"[{i}/{len(todo)}] {cell.label}: {record['wall_s']} s, avg JCT a "
                f"{arms['a']['avg_jct_s']:,.0f} s, b vs a "
                f"{change_pct(arms['b']['avg_jct_s'], arms['a']['avg_jct_s']):+.1f} %, d vs c "
                f"{change_pct(arms['d']['avg_jct_s'], arms['c']['avg_jct_s']):+.1f} %")
        records.append(record)
    return records


def report(records: list[dict], window: str) -> tuple[str | None, dict]:
    """(the markdown, or None when a cell failed; the ``--out`` document)."""
    failed = [r for r in records if r["error"]]
    doc = {"complete": not failed, "window": window, "cells": records}
    if failed:
        return None, doc
    rows = [(Cell(**r["cell"]), r["result"]) for r in records]
    text = (f"{window}\n\n{table(rows)}\n\nb vs a, d vs c: change in average JCT; "
            "cross-rack share and uplink p99 as `sluice whatif --json` reports them.")
    return text, doc


def subprocess_runner(argv: list[str]) -> tuple[int, str, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=harness.ROOT,
                          timeout=CELL_TIMEOUT_S)
    return proc.returncode, proc.stdout, proc.stderr


def main(argv: list[str] | None = None) -> int:
    from job_scheduler.simulation.workloads import SHARED_WORKLOADS, load_workload
    from sluice_common.errors import InputError

    ap = harness.parser(__doc__, quick=f"{QUICK_JOBS:,} Philly jobs (default off)",
                        json_out=False)
    ap.add_argument("--jobs", type=int, default=None,
                    help=f"Philly jobs: the first N by submission (default {PHILLY_JOBS:,}; "
                         f"{QUICK_JOBS:,} with --quick)")
    ap.add_argument("--philly", default=str(SHARED_WORKLOADS / "philly.csv"),
                    help="the Philly CSV (default $SLUICE_WORKLOADS/philly.csv)")
    ap.add_argument("--tiresias", default=str(SHARED_WORKLOADS / "tiresias_60_job.csv"),
                    help="the Tiresias 60-job CSV (default $SLUICE_WORKLOADS/tiresias_60_job.csv)")
    ap.add_argument("--out", default="whatif-table.json",
                    help="every cell's command and raw JSON (default whatif-table.json)")
    args = ap.parse_args(argv)
    jobs = args.jobs if args.jobs is not None else (QUICK_JOBS if args.quick else PHILLY_JOBS)
    if jobs < 1:
        ap.error(f"argument --jobs: must be >= 1, got {jobs}")
    try:
        window = window_label(args.philly, load_workload(args.philly, trace_format="philly",
                                                         jobs=jobs))
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(window, file=sys.stderr, flush=True)
    records = run_cells(cells(args.philly, args.tiresias, jobs), subprocess_runner,
                        lambda line: print(line, file=sys.stderr, flush=True))
    text, doc = report(records, window)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    if text is None:
        failed = sum(1 for r in records if r["error"])
        print(f"INCOMPLETE: {failed} of {len(records)} cells failed (above); no table. "
              f"Raw results: {args.out}", file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
