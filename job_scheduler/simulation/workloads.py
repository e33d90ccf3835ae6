"""Workloads: the Proteus paper's generated scenarios, public traces, or a job YAML file.

``load_workload(name_or_path, trace_format=None, jobs=None, seed=0)`` returns JobSpecs
sorted by arrival:

- ``proteus-{small,big}-{dispersed,concentrated}``: generated (below), seeded.
- ``bursty-moderate``, ``bursty-heavy``: bursty synthetic traces (``bursty.py``), seeded.
- ``trace_format="tiresias"``: a Tiresias CSV (``job_id,num_gpu,submit_time,iterations,
  model_name,duration,interval``), e.g. ``../shared/workloads/tiresias_60_job.csv``.
- ``trace_format="philly"``: the Philly CSV (``timestamp,duration,num_gpus,gpu_time,
  cluster``).
- ``trace_format="sacct"``: a site's own Slurm history, ``sacct --json`` or ``sacct
  --parsable2`` (``sacct_trace.py``; ``trace_assumptions=FILE`` says what the record lacks,
  ``trace_assumptions.py``); :func:`load_workload_report` also returns what it left out.
- otherwise a job YAML file (``jobspec.load_jobs``).

A file name not found as given (relative to the working directory) is looked up in
``$SLUICE_WORKLOADS`` (unset: ../shared/workloads beside the checkout); a name found in
neither is refused naming both places.
``jobs=N`` keeps the first N jobs in arrival order.

Generated scenarios (the Proteus paper gives the model set and the small/big x
dispersed/concentrated design; the numbers below are ours, fixed for all four
scenarios and all policies, never tuned to favour one):

- models: uniformly from VGG16, AlexNet, GoogLeNet, ResNet18.
- job count: 100 (``jobs=`` overrides).
- job size mix: ``small-*`` = 80 % small-data / 20 % big-data jobs; ``big-*`` = 20 % / 80 %
  (exact counts, shuffled into the arrival order).
  small-data job: dataset_size uniform in [10,000, 60,000] samples (CIFAR-sized);
  big-data job: dataset_size uniform in [100,000, 500,000] (ImageNet subsets).
- epochs: uniform integer in [1, 3]; batch_size: uniformly 32 or 64; num_ps: 1.
- max_gpus (``caps``): ``"paper"`` (default) = 8 for every job. The paper's decision
  ranges over n in (0, N] with one N for all jobs, i.e. the scheduler, not the user,
  picks the count; 8 is one 8-GPU server and the largest cap of ``"mixed"``.
  On two-rack (4 GPUs per host) N = 4, 8 and 16 give identical results: the decision
  never crosses a host there. ``"mixed"`` = uniformly 1, 2, 4 or 8 per job, kept for
  comparison (a quarter of the jobs are then
  pinned to one GPU, which caps what any count policy can gain over single-GPU at
  about 0.5; ``bench/results/proteus-reproduction.md``). Both settings draw the same
  random numbers, so a seed gives the same jobs under either; only max_gpus differs.
- arrivals, same mean rate (one job per 120 s on average) in both patterns:
  ``dispersed`` = a Poisson process (exponential gaps, mean 120 s);
  ``concentrated`` = bursts of 20 jobs; inside a burst exponential gaps with mean 5 s,
  consecutive bursts start 20 * 120 s = 2,400 s apart, so the long-run rate matches.

Trace rules:

- Tiresias: name ``tiresias-<job_id>``, model from ``model_name`` (``inception3`` =
  Inception_V3, ``inception4`` = Inception_V4), arrival = ``submit_time``,
  ``trace_gpus`` = ``max_gpus`` = ``num_gpu`` (a policy may give fewer GPUs, never more
  than the user asked for), ``trace_duration`` = ``duration``, batch_size 32, epochs 1,
  dataset_size = iterations * 32 * num_gpu (samples processed). The Estimator rescales
  the work so that C(trace_gpus) reproduces the trace duration (estimator.py).
- Philly: no model names. Deterministic rule by GPU-time class (``gpu_time`` =
  duration * num_gpus): < 1 GPU-hour ResNet18, < 10 GPU-hours GoogLeNet, < 100
  GPU-hours AlexNet, otherwise VGG16 (bigger jobs get the models with more parameters,
  so long jobs are also the communication-heavy ones). arrival = seconds since the
  earliest timestamp in the file (timestamps read as UTC), name ``philly-<line>``,
  ``trace_gpus`` = ``max_gpus`` = ``num_gpus``, ``trace_duration`` = ``duration``,
  batch_size 32, epochs 1, dataset_size = 32 * num_gpus * round(duration) (a nominal
  one iteration per second; the Estimator re-derives the work from the duration).
  ``extra`` keeps ``cluster`` and ``gpu_time``, and ``assumption`` names the rule
  (``trace_assumptions.DEFAULT_LABEL``; ``assumption_summary`` counts them).

A malformed trace raises one :class:`TraceErrors` (an InputError) listing every bad row
and every bad column of it (up to MAX_ERRORS), each naming the file, the line number and
the column; nothing is loaded.
"""

from __future__ import annotations

import csv
import os
import math
import random
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Callable

from job_scheduler.simulation.bursty import BURSTY, generate_bursty
from job_scheduler.simulation.sacct_trace import SacctTrace, load_sacct, looks_like_parsable
from job_scheduler.simulation.trace_assumptions import (DEFAULT_LABEL, TRACE_BATCH_SIZE,
                                                        load_assumptions, philly_model)
from job_scheduler.simulation.trace_errors import MAX_ERRORS, TraceErrors
from sluice_common.jobspec import JobSpec, load_jobs
from sluice_common.models import canonical_name
from sluice_common.errors import InputError, option_error

TRACE_FORMATS = ("tiresias", "philly", "sacct")
# The public traces live in the project's sibling folder ../shared/workloads (beside the
# repository checkout, wherever that is); SLUICE_WORKLOADS overrides it.
WORKLOADS_ENV = "SLUICE_WORKLOADS"
DEFAULT_SHARED_WORKLOADS = Path(__file__).resolve().parents[3] / "shared" / "workloads"
SHARED_WORKLOADS = Path(os.environ.get(WORKLOADS_ENV, DEFAULT_SHARED_WORKLOADS))


def workloads_folder() -> Path:
    """The folder a workload file name is looked up in when it is not found as given:
    ``$SLUICE_WORKLOADS`` as it is now, else ../shared/workloads beside the checkout."""
    return Path(os.environ.get(WORKLOADS_ENV) or DEFAULT_SHARED_WORKLOADS)


def find_workload_file(spec: str) -> Path | None:
    """``spec`` as given when it exists, else the file of that name in
    :func:`workloads_folder` (a relative path only), else None."""
    path = Path(spec)
    if path.exists():
        return path
    if not path.is_absolute():
        shared = workloads_folder() / path
        if shared.exists():
            return shared
    return None

# ---- generated scenarios ----------------------------------------------------------------

SCENARIO_MODELS = ("vgg16", "alexnet", "googlenet", "resnet18")
SCENARIO_JOBS = 100
SMALL_DATA = (10_000, 60_000)
BIG_DATA = (100_000, 500_000)
BIG_FRACTION = {"small": 0.2, "big": 0.8}
EPOCHS = (1, 3)
BATCH_SIZES = (32, 64)
MIXED_MAX_GPUS = (1, 2, 4, 8)      # caps="mixed"
PAPER_N = 8                        # caps="paper": one N for every job
SCENARIO_CAPS = ("paper", "mixed")
MEAN_GAP_S = 120.0
BURST_SIZE = 20
BURST_MEAN_GAP_S = 5.0

SCENARIOS = tuple(f"proteus-{size}-{pattern}" for size in ("small", "big")
                  for pattern in ("dispersed", "concentrated"))
# every workload known by name: ``load_workload`` generates these
BUILTIN_WORKLOADS = SCENARIOS + tuple(BURSTY)


def _arrivals(pattern: str, count: int, rng: random.Random) -> list[float]:
    times, t = [], 0.0
    if pattern == "dispersed":
        for _ in range(count):
            times.append(round(t, 3))
            t += rng.expovariate(1.0 / MEAN_GAP_S)
        return times
    for i in range(count):                      # concentrated: bursts
        if i % BURST_SIZE == 0:
            t = (i // BURST_SIZE) * BURST_SIZE * MEAN_GAP_S
        times.append(round(t, 3))
        t += rng.expovariate(1.0 / BURST_MEAN_GAP_S)
    return times


def generate_scenario(name: str, jobs: int | None = None, seed: int = 0,
                      caps: str = "paper") -> list[JobSpec]:
    """One of SCENARIOS, ``jobs`` jobs (default 100), reproducible from ``seed``;
    ``caps`` picks max_gpus (SCENARIO_CAPS, see the module docstring)."""
    if name not in SCENARIOS:
        raise InputError(name, f"unknown scenario (known: {', '.join(SCENARIOS)})")
    if caps not in SCENARIO_CAPS:
        raise InputError("argument", f"unknown caps {caps!r} (known: "
                         f"{', '.join(SCENARIO_CAPS)})", field="caps")
    _, size, pattern = name.split("-")
    count = SCENARIO_JOBS if jobs is None else jobs
    rng = random.Random(f"{name}/{seed}")
    arrivals = _arrivals(pattern, count, rng)
    n_big = round(BIG_FRACTION[size] * count)          # exact mix, shuffled
    big_flags = [True] * n_big + [False] * (count - n_big)
    rng.shuffle(big_flags)
    out = []
    for i, (arrival, big) in enumerate(zip(arrivals, big_flags)):
        lo, hi = BIG_DATA if big else SMALL_DATA
        model, dataset_size = rng.choice(SCENARIO_MODELS), rng.randint(lo, hi)
        epochs, batch_size = rng.randint(*EPOCHS), rng.choice(BATCH_SIZES)
        mixed_cap = rng.choice(MIXED_MAX_GPUS)      # drawn under both caps: same jobs
        out.append(JobSpec(
            name=f"{size}-{pattern}-{i:03d}", model=model, dataset_size=dataset_size,
            epochs=epochs, batch_size=batch_size,
            max_gpus=mixed_cap if caps == "mixed" else PAPER_N,
            arrival=arrival, extra={"scenario": name, "data": "big" if big else "small"}))
    return out


# ---- traces -------------------------------------------------------------------------------

class _Row:
    """Field access for one CSV row. A bad value is recorded as InputError(file, line,
    column) in ``errors`` and read as None, so that one pass finds every bad column."""
    __slots__ = ("source", "line", "cells", "index", "errors")

    def __init__(self, source: str, line: int, cells: list[str], index: dict[str, int]):
        self.source, self.line, self.cells, self.index = source, line, cells, index
        self.errors: list[InputError] = []

    def fail(self, column: str, reason: str) -> None:
        self.errors.append(InputError(self.source, reason, element=f"line {self.line}",
                                      field=column))

    def text(self, column: str) -> str | None:
        value = self.cells[self.index[column]].strip()
        if not value:
            self.fail(column, "missing value")
            return None
        return value

    def number(self, column: str, *, integer: bool = False, minimum: float = 0.0,
               strict: bool = False) -> float | None:
        text = self.cells[self.index[column]]
        try:
            value = float(text)
        except ValueError:
            return self.fail(column, f"not a number: {text.strip()!r}")
        if not math.isfinite(value):
            return self.fail(column, f"not a finite number: {text.strip()!r}")
        if integer and value != int(value):
            return self.fail(column, f"not an integer: {text.strip()!r}")
        if value < minimum or (strict and value == minimum):
            return self.fail(column, f"must be {'>' if strict else '>='} {minimum:g}, "
                                     f"got {text.strip()}")
        return int(value) if integer else value


def _read_csv(path: Path, columns: tuple[str, ...], parse_row: Callable[[_Row], object]) -> list:
    """Every data row through ``parse_row`` (which returns None when the row recorded
    errors); any error raises TraceErrors with all of them, after the whole file."""
    source = str(path)
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as err:
        raise InputError(source, f"cannot read: {err.strerror or err}")
    out: list = []
    errors: list[InputError] = []
    with handle:
        reader = csv.reader(handle)
        try:
            header = [h.strip() for h in next(reader, [])]
            missing = [c for c in columns if c not in header]
            if missing:
                raise InputError(source, f"missing column (header: {','.join(header)})",
                                 element="line 1", field=missing[0])
            index = {c: header.index(c) for c in columns}
            width = len(header)
            for cells in reader:
                if not cells:
                    continue                              # blank line
                if len(cells) != width:
                    errors.append(InputError(source, f"expected {width} columns, got "
                                             f"{len(cells)}", element=f"line {reader.line_num}"))
                    continue
                row = _Row(source, reader.line_num, cells, index)
                parsed = parse_row(row)
                errors += row.errors
                if not row.errors:
                    out.append(parsed)
        except UnicodeDecodeError as err:
            errors.append(InputError(source, f"not UTF-8 text: {err.reason}"))
        except csv.Error as err:
            errors.append(InputError(source, f"bad CSV: {err}",
                                     element=f"line {reader.line_num}"))
    if errors:
        raise TraceErrors(errors[:MAX_ERRORS], max(0, len(errors) - MAX_ERRORS))
    if not out:
        raise InputError(source, "no jobs in the trace")
    return out


TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")


def _tiresias_job(r: _Row) -> JobSpec | None:
    job_id = r.text("job_id")
    gpus = r.number("num_gpu", integer=True, minimum=1)
    model_text = r.text("model_name")
    model = canonical_name(model_text) if model_text else None
    if model_text and model is None:
        r.fail("model_name", f"unknown model {model_text!r}")
    iterations = r.number("iterations", integer=True, minimum=1)
    arrival = r.number("submit_time")
    duration = r.number("duration", strict=True)
    if r.errors:
        return None
    return JobSpec(
        name=f"tiresias-{job_id}", model=model,
        dataset_size=iterations * TRACE_BATCH_SIZE * gpus, epochs=1,
        batch_size=TRACE_BATCH_SIZE, max_gpus=gpus, arrival=arrival,
        trace_gpus=gpus, trace_duration=duration, extra={"line": r.line})


def trace_kind(path: Path) -> str | None:
    """'tiresias' or 'philly' for a CSV trace recognised by its header, 'sacct' for a
    sacct parsable2 export (a ``|``-separated header naming JobID), None for what is
    not CSV (a job YAML file; a sacct JSON export needs its format given); InputError naming --trace-format for a CSV header of
    neither format."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            first = next((line for line in f if line.strip()), "")
    except OSError:
        return None                        # load_jobs says why it cannot be read
    if looks_like_parsable(first):
        return "sacct"
    if "," not in first or ":" in first or first.lstrip().startswith(("#", "-", "{")):
        return None
    header = {h.strip() for h in first.split(",")}
    for kind, columns in (("tiresias", TIRESIAS_COLUMNS), ("philly", PHILLY_COLUMNS)):
        if set(columns) <= header:
            return kind
    raise option_error("trace_format", f"{path}: looks like a CSV trace, but its header "
                       f"({first.strip()[:120]}) is neither a Tiresias trace's "
                       f"({','.join(TIRESIAS_COLUMNS)}) nor a Philly trace's "
                       f"({','.join(PHILLY_COLUMNS)}); give tiresias|philly, or a job "
                       "YAML file")


def load_tiresias(path: str | Path) -> list[JobSpec]:
    jobs = _read_csv(Path(path), TIRESIAS_COLUMNS, _tiresias_job)
    seen: set[str] = set()
    duplicates = []
    for job in jobs:
        if job.name in seen:
            duplicates.append(InputError(str(path), "duplicate job_id",
                                         element=f"line {job.extra['line']}", field="job_id"))
        seen.add(job.name)
    if duplicates:
        raise TraceErrors(duplicates[:MAX_ERRORS], max(0, len(duplicates) - MAX_ERRORS))
    return jobs


_EPOCH = datetime(1970, 1, 1)
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
# the Philly rule (philly_model) lives in trace_assumptions.py: it is the default
# assumption of every trace that names no model


def _philly_row(r: _Row) -> tuple | None:
    text = r.text("timestamp")
    ts = None
    if text is not None:
        try:
            ts = (datetime.fromisoformat(text) - _EPOCH).total_seconds()   # naive = UTC
        except ValueError:
            r.fail("timestamp", f"not a 'YYYY-MM-DD HH:MM:SS' timestamp: {text!r}")
    row = (ts, r.line, r.number("duration", strict=True),
           r.number("num_gpus", integer=True, minimum=1), r.number("gpu_time"),
           r.text("cluster"))
    return None if r.errors else row


def load_philly(path: str | Path) -> list[JobSpec]:
    """All rows validated first, then jobs with arrivals relative to the earliest row."""
    rows = _read_csv(Path(path), PHILLY_COLUMNS, _philly_row)
    first = min(row[0] for row in rows)
    return [JobSpec(
        name=f"philly-{line}", model=philly_model(duration * gpus),
        dataset_size=TRACE_BATCH_SIZE * gpus * max(1, round(duration)), epochs=1,
        batch_size=TRACE_BATCH_SIZE, max_gpus=gpus, arrival=ts - first, trace_gpus=gpus,
        trace_duration=duration, extra={"line": line, "cluster": cluster, "gpu_time": gpu_time,
                                        "assumption": DEFAULT_LABEL})
        for ts, line, duration, gpus, gpu_time, cluster in rows]


# ---- entry point -----------------------------------------------------------------------------

TRACE_CAPS = ("requested", "paper")


def load_workload(name_or_path: str | Path, trace_format: str | None = None,
                  jobs: int | None = None, seed: int = 0,
                  caps: str = "paper", trace_caps: str = "requested", *,
                  trace_assumptions: str | Path | None = None) -> list[JobSpec]:
    """Jobs sorted by arrival (stable), the first ``jobs`` of them when given;
    ``caps`` applies to generated scenarios only (``generate_scenario``).
    ``trace_caps`` applies to trace jobs (Tiresias, Philly, sacct, bursty): "requested"
    (the default) = max_gpus is the trace's GPU count, a policy may give fewer, never
    more; "paper" = max_gpus = max(trace count, PAPER_N), the Proteus setting the
    scenarios use (the scheduler picks n in (0, N]); fixed-count policies still run the
    trace's count. ``trace_assumptions``: an assumptions YAML file for a sacct export
    (``trace_assumptions.py``). :func:`load_workload_report` also says what a sacct
    export left out."""
    return load_workload_report(name_or_path, trace_format, jobs, seed, caps, trace_caps,
                                trace_assumptions=trace_assumptions)[0]


def load_workload_report(name_or_path: str | Path, trace_format: str | None = None,
                         jobs: int | None = None, seed: int = 0, caps: str = "paper",
                         trace_caps: str = "requested", *,
                         trace_assumptions: str | Path | None = None,
                         ) -> tuple[list[JobSpec], SacctTrace | None]:
    """:func:`load_workload`'s jobs, and for a sacct export its account of itself (the
    jobs it left out, by reason; :meth:`SacctTrace.report_lines`); None for any other
    workload."""
    if trace_caps not in TRACE_CAPS:
        raise InputError("argument", f"unknown trace caps {trace_caps!r} (known: "
                         f"{', '.join(TRACE_CAPS)})", field="trace-caps")
    loaded, trace = _load(name_or_path, trace_format, jobs, seed, caps, trace_assumptions)
    if trace_caps == "paper":
        loaded = [replace(j, max_gpus=max(j.max_gpus, PAPER_N)) if j.trace_gpus else j
                  for j in loaded]
    return loaded, trace


def _load(name_or_path, trace_format, jobs, seed, caps,
          trace_assumptions) -> tuple[list[JobSpec], SacctTrace | None]:
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InputError("argument", f"must be an integer >= 1, got {jobs!r}", field="jobs")
    spec = str(name_or_path)
    if trace_format is not None:
        if trace_format not in TRACE_FORMATS:
            raise InputError("argument", f"unknown trace format {trace_format!r} "
                             f"(known: {', '.join(TRACE_FORMATS)})", field="trace-format")
    elif spec in SCENARIOS or spec in BURSTY:
        _no_assumptions(trace_assumptions, f"the generated workload {spec}")
        if spec in SCENARIOS:
            return generate_scenario(spec, jobs, seed, caps), None
        return generate_bursty(spec, jobs, seed), None
    found = find_workload_file(spec)
    if found is None:
        builtin = f"nor a built-in workload ({', '.join(BUILTIN_WORKLOADS)})"
        if Path(spec).is_absolute():
            raise InputError(spec, f"cannot read: no such file; {builtin}")
        folder = workloads_folder()
        where = (f"${WORKLOADS_ENV} ({folder})" if os.environ.get(WORKLOADS_ENV)
                 else f"{folder} (set ${WORKLOADS_ENV} to look elsewhere)")
        raise InputError(spec, f"cannot read: no such file, neither as given "
                         f"({Path(spec).absolute()}) nor in {where}; {builtin}")
    spec = str(found)
    if trace_format is None:
        trace_format = trace_kind(found)      # a trace given without its format
    trace = None
    if trace_format == "sacct":
        assumptions = load_assumptions(trace_assumptions) if trace_assumptions else ()
        trace = load_sacct(spec, assumptions)
        loaded = sorted(trace.jobs, key=lambda j: j.arrival)
    else:
        _no_assumptions(trace_assumptions, f"a {trace_format} trace" if trace_format
                        else "a job file")
        load = {None: load_jobs, "tiresias": load_tiresias, "philly": load_philly}[trace_format]
        loaded = sorted(load(spec), key=lambda j: j.arrival)
    if jobs is not None:
        loaded = loaded[:jobs]
        if trace_format in ("philly", "sacct") and loaded:   # arrivals from the first kept
            first = loaded[0].arrival
            loaded = [replace(j, arrival=j.arrival - first) for j in loaded]
    return loaded, trace


def _no_assumptions(trace_assumptions, what: str) -> None:
    if trace_assumptions:
        raise option_error("trace_assumptions", f"applies to a sacct export (trace format "
                           f"sacct), not to {what}")
