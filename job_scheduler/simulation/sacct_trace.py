"""A site's own Slurm history as a trace: ``sacct --json`` or ``sacct --parsable2`` (pure).

Two shapes, told apart by the first character (``{`` is JSON):

- ``sacct --json`` (Slurm 22.05 on): ``{"jobs": [...]}``, one record per job (its steps
  nested under ``steps`` and not read); per job ``job_id``, ``name``, ``partition``,
  ``state.current`` (a string, or from 23.11 a list: the state, then flags),
  ``time.submission``, ``time.start``, ``time.end`` (epoch seconds, or an object
  ``{"set", "infinite", "number"}`` in later data parsers; 0 or unset: never happened)
  and ``tres.allocated``, a list of ``{type, name, count}``: the GPUs are the entry of
  type ``gres`` named ``gpu`` (or, where only typed entries such as ``gpu:a100`` are
  listed, their sum).
- ``sacct --parsable2 --format=JobID,JobName,Partition,Submit,Start,End,State,AllocTRES``
  (:data:`PARSABLE_FORMAT`, the header kept): ``|`` between fields, fields named by the
  header line. Required: JobID, Submit, Start, End and one GPU field, the first of
  :data:`GPU_FIELDS` the header has: ``AllocTRES``/``ReqTRES``
  (``billing=4,cpu=4,gres/gpu=2,mem=1000M,node=1``; typed ``gres/gpu:a100=2`` summed
  where no plain ``gres/gpu`` is given) or ``AllocGRES``/``ReqGRES`` of older releases
  (``gpu:2``, ``gpu:a100:2(IDX:0-1)``). Step lines (``123.batch``, ``123.extern``,
  ``123.0``) are skipped and counted: a job is its allocation record. Times are ISO
  (``2024-05-01T10:00:00``, the exporting machine's local time, read as given: only
  differences count, and a job across a daylight-saving change is off by that hour;
  ``SLURM_TIME_FORMAT=%s`` exports epoch seconds, read too); ``Unknown``/``None``/empty:
  never happened. A JobName holding ``|`` is put back together.

Each record that ran with GPUs becomes a JobSpec: name ``sacct-<JobID>``, arrival = its
submit time minus the earliest kept submit time, ``trace_gpus`` = ``max_gpus`` = the
allocated GPUs, ``trace_duration`` = end - start; model, batch size and PS count from an
assumption (:mod:`job_scheduler.simulation.trace_assumptions`, named in
``extra["assumption"]``); epochs 1 and dataset_size = batch_size * GPUs * round(duration)
(a nominal iteration per second, as the Philly rule: the Estimator re-derives the work
from the duration). ``extra`` keeps ``job_id``, ``job_name``, ``partition``, ``state``.

Left out, and counted by reason in :attr:`SacctTrace.left_out` (never silently; the keys
of :data:`LEFT_OUT_REASONS`):

- ``never_started``: no start time, PENDING, or CANCELLED before it started (Slurm
  records such a job with its cancel time as start: it is told by its empty
  allocation, or, where the export has no AllocTRES, by its 0 s);
- ``not_ended``: started, no end (RUNNING when exported);
- ``no_gpus``: ran without GPUs (a CPU-only job is not a job of the GPU simulation);
- ``zero_time``: ended within the second it started (nothing to reproduce).

Bad input raises InputError naming the file, the record (``line N`` / ``jobs[i]``) and
the field: a header without a GPU field or an export whose jobs name no ``gres/gpu`` at
all (the cluster's accounting records GPUs only with ``AccountingStorageTRES=gres/gpu``
in slurm.conf), an unreadable time, a record of the wrong shape; every problem of the
file at once, nothing loaded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from job_scheduler.simulation.trace_assumptions import Assumption, assume
from job_scheduler.simulation.trace_errors import MAX_ERRORS, TraceErrors
from sluice_common.errors import InputError, raise_all, read_user_text
from sluice_common.jobspec import JobSpec

PARSABLE_FIELDS = ("JobID", "JobName", "Partition", "Submit", "Start", "End", "State",
                   "AllocTRES")
PARSABLE_FORMAT = ",".join(PARSABLE_FIELDS)
REQUIRED_FIELDS = ("JobID", "Submit", "Start", "End")
# the fields a GPU count is read from, the first the header has
GPU_FIELDS = ("AllocTRES", "AllocGRES", "ReqTRES", "ReqGRES")
JSON_GPU_FIELD = "tres.allocated"
# what sacct prints for a time that never came
NO_TIME = ("", "unknown", "none", "0")

NEVER_STARTED = "never_started"
NOT_ENDED = "not_ended"
NO_GPUS = "no_gpus"
ZERO_TIME = "zero_time"
# why a record is no job of the simulation, in the order a report lists them
LEFT_OUT_REASONS = {
    NEVER_STARTED: "never started (pending, or cancelled before it started)",
    NOT_ENDED: "not ended (running when exported)",
    NO_GPUS: "no GPUs (a CPU-only job is no job of the GPU simulation)",
    ZERO_TIME: "ran 0 s (ended within the second it started)",
}


@dataclass(frozen=True)
class SacctRecord:
    """One job's allocation record, as read. ``gpus`` None: the record names no GPU
    count at all (its TRES list has no ``gres/gpu``)."""
    where: str                  # "line 4" | "jobs[2]"
    job_id: str
    name: str
    partition: str
    state: str
    submit: float
    start: float | None
    end: float | None
    gpus: int | None
    # whether Slurm allocated the job anything (its allocation TRES non-empty); None
    # where the export does not say (a requested or GRES field)
    allocated: bool | None = None


@dataclass(frozen=True)
class SacctTrace:
    """The jobs of an export and what was left out of them, and why."""
    source: str
    form: str                                    # "json" | "parsable2"
    gpu_field: str                               # where the GPU counts were read
    jobs: list[JobSpec]
    # reason (a key of LEFT_OUT_REASONS) -> the Slurm job ids left out for it
    left_out: dict[str, tuple[str, ...]] = field(default_factory=dict)
    steps: int = 0                               # step lines skipped (parsable2)

    def left_out_counts(self) -> dict[str, int]:
        return {reason: len(ids) for reason, ids in self.left_out.items()}

    def report_lines(self) -> list[str]:
        """What a report prints: the export, the jobs kept, each reason with its count
        (and the first job ids)."""
        dropped = sum(len(ids) for ids in self.left_out.values())
        out = [f"sacct {self.form} export {self.source}: {len(self.jobs)} job(s) kept, "
               f"{dropped} left out; GPUs from {self.gpu_field}"
               + (f"; {self.steps} step line(s) skipped (a job is its allocation)"
                  if self.steps else "")]
        for reason, ids in self.left_out.items():
            shown = ", ".join(ids[:8]) + (", ..." if len(ids) > 8 else "")
            out.append(f"  left out {len(ids)}: {LEFT_OUT_REASONS[reason]} (job {shown})")
        return out


# ---- values --------------------------------------------------------------------------------

def _number(value: Any) -> float | None:
    """A JSON number, or a data parser's ``{"set", "infinite", "number"}``; None where it
    is unset, infinite or absent. TypeError for anything else."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


def _epoch(value: Any) -> float | None:
    """A JSON time: None for unset or 0 (Slurm's 'never')."""
    number = _number(value)
    return None if number is None or number <= 0 else number


_EPOCH = datetime(1970, 1, 1)


def parse_time(text: str) -> float | None:
    """A parsable2 time as seconds (ISO read as naive, or epoch seconds); None for a
    time that never came. ValueError for anything else."""
    text = text.strip()
    if text.lower() in NO_TIME:
        return None
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    return (datetime.fromisoformat(text) - _EPOCH).total_seconds()


def _gpu_total(entries: dict[str, int]) -> int | None:
    """``{"gpu": n, "gpu:a100": m, ...}`` -> the plain count, else the typed ones'
    sum; None when no GPU is named."""
    if "gpu" in entries:
        return entries["gpu"]
    typed = [n for k, n in entries.items() if k.startswith("gpu:")]
    return sum(typed) if typed else None


def tres_gpus(text: str) -> int | None:
    """The GPUs of a TRES string (``cpu=4,gres/gpu=2,mem=1G``); None when it names none.
    ValueError for a GPU count that is not a whole number."""
    entries = {}
    for item in text.split(","):
        key, eq, value = item.strip().partition("=")
        if key == "gres/gpu" or key.startswith("gres/gpu:"):
            if not eq or not value.strip().isdigit():
                raise ValueError(f"{key}: not a whole GPU count: {value!r}")
            entries[key.removeprefix("gres/")] = int(value)
    return _gpu_total(entries)


def gres_gpus(text: str) -> int | None:
    """The GPUs of a GRES string (``gpu:2``, ``gpu:a100:2(IDX:0-1)``, ``gpu``); None when
    it names none. ValueError for a count that is not a whole number."""
    entries: dict[str, int] = {}
    for item in re.sub(r"\([^)]*\)", "", text).split(","):
        parts = item.strip().split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) == 1:
            count, key = "1", "gpu"
        elif parts[-1].isdigit():
            count, key = parts[-1], ":".join(parts[:-1])
        elif len(parts) == 2:
            count, key = "1", item.strip()           # gpu:a100, a type without a count
        else:
            raise ValueError(f"not a whole GPU count: {item.strip()!r}")
        entries[key] = entries.get(key, 0) + int(count)
    return _gpu_total(entries)


# ---- sacct --json ----------------------------------------------------------------------------

def _json_state(value: Any) -> str:
    current = value.get("current") if isinstance(value, dict) else value
    if isinstance(current, list):
        current = current[0] if current else ""
    return str(current or "").split(" ")[0].upper()


def _json_allocated(job: dict) -> Any:
    tres = job.get("tres")
    return tres.get("allocated") if isinstance(tres, dict) else None


def _json_gpus(job: dict) -> int | None:
    allocated = _json_allocated(job)
    if allocated is None:
        return None
    if not isinstance(allocated, list):
        raise TypeError(f"not a list: {allocated!r}")
    entries: dict[str, int] = {}
    for t in allocated:
        if isinstance(t, dict) and t.get("type") == "gres" and \
                str(t.get("name") or "").split(":")[0] == "gpu":
            count = _number(t.get("count"))
            if count is None or count != int(count) or count < 0:
                raise ValueError(f"gres {t.get('name')}: not a whole GPU count: "
                                 f"{t.get('count')!r}")
            entries[str(t["name"])] = int(count)
    return _gpu_total(entries)


def _json_record(i: int, job: Any, source: str, errors: list[InputError]) -> SacctRecord | None:
    where = f"jobs[{i}]"
    if not isinstance(job, dict):
        errors.append(InputError(source, f"not a job record: {type(job).__name__}",
                                 element=where))
        return None
    job_id = job.get("job_id")
    if isinstance(job_id, dict):
        job_id = _number(job_id)
    if isinstance(job_id, float):
        job_id = int(job_id)
    if not isinstance(job_id, int) or isinstance(job_id, bool):
        errors.append(InputError(source, f"not a job id: {job.get('job_id')!r}",
                                 element=where, field="job_id"))
        return None
    where = f"jobs[{i}] (job {job_id})"
    times = job.get("time") if isinstance(job.get("time"), dict) else {}
    values: dict[str, float | None] = {}
    for key in ("submission", "start", "end"):
        try:
            values[key] = _epoch(times.get(key))
        except TypeError as err:
            errors.append(InputError(source, str(err), element=where, field=f"time.{key}"))
            return None
    if values["submission"] is None:
        errors.append(InputError(source, "missing: every job record has its submit time",
                                 element=where, field="time.submission"))
        return None
    try:
        gpus = _json_gpus(job)
    except (TypeError, ValueError) as err:
        errors.append(InputError(source, str(err), element=where, field=JSON_GPU_FIELD))
        return None
    allocated = _json_allocated(job)
    return SacctRecord(where=where, job_id=str(job_id), name=str(job.get("name") or ""),
                       partition=str(job.get("partition") or ""),
                       state=_json_state(job.get("state")), submit=values["submission"],
                       start=values["start"], end=values["end"], gpus=gpus,
                       allocated=None if allocated is None else bool(allocated))


def parse_sacct_json(text: str, source: str) -> list[SacctRecord]:
    """Every job record of ``sacct --json``; InputError (all of them) for bad ones."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise InputError(source, f"not JSON: {err}")
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        raise InputError(source, "not sacct --json output: no top-level 'jobs' list",
                         field="jobs")
    errors: list[InputError] = []
    records = [r for i, job in enumerate(jobs)
               if (r := _json_record(i, job, source, errors)) is not None]
    _raise(errors)
    if jobs and not any(isinstance(j, dict) and _json_allocated(j) is not None for j in jobs):
        raise InputError(source, "no job record has a TRES allocation, the only GPU "
                         "count sacct --json gives", field=JSON_GPU_FIELD)
    return records


# ---- sacct --parsable2 -----------------------------------------------------------------------

def _is_step(job_id: str) -> bool:
    return "." in job_id


def parse_sacct_parsable(text: str, source: str) -> tuple[list[SacctRecord], int, str]:
    """The allocation records of a ``sacct --parsable2`` export (header kept), the count
    of step lines skipped, and the GPU field read."""
    lines = text.splitlines()
    first = next((n for n, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise InputError(source, "empty: no sacct header line")
    header = [h.strip() for h in lines[first].split("|")]
    head = f"line {first + 1}"
    if "JobID" not in header:
        raise InputError(source, f"not a sacct --parsable2 header ({lines[first][:120]!r}): "
                         "export with the header (sacct without -n/--noheader), fields "
                         f"{PARSABLE_FORMAT}", element=head, field="JobID")
    missing = [f for f in REQUIRED_FIELDS if f not in header]
    if missing:
        raise InputError(source, f"missing field (header: {'|'.join(header)}); export "
                         f"sacct --parsable2 --format={PARSABLE_FORMAT}", element=head,
                         field=missing[0])
    gpu_field = next((f for f in GPU_FIELDS if f in header), None)
    if gpu_field is None:
        raise InputError(source, f"no GPU field in the header ({'|'.join(header)}): a GPU "
                         f"simulation needs one of {', '.join(GPU_FIELDS)}; export sacct "
                         f"--parsable2 --format={PARSABLE_FORMAT}", element=head,
                         field=GPU_FIELDS[0])
    index = {h: k for k, h in enumerate(header)}
    width = len(header)
    records: list[SacctRecord] = []
    errors: list[InputError] = []
    steps = 0
    for n, line in enumerate(lines[first + 1:], first + 2):
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) > width and "JobName" in index:      # a name holding '|'
            k, extra = index["JobName"], len(cells) - width
            cells = cells[:k] + ["|".join(cells[k:k + extra + 1])] + cells[k + extra + 1:]
        where = f"line {n}"
        if len(cells) != width:
            errors.append(InputError(source, f"expected {width} fields, got {len(cells)}",
                                     element=where))
            continue
        row = {name: cells[k].strip() for name, k in index.items()}

        def cell(name: str, row=row) -> str:
            return row.get(name, "")
        job_id = cell("JobID")
        if not job_id:
            errors.append(InputError(source, "missing value", element=where, field="JobID"))
            continue
        if _is_step(job_id):
            steps += 1
            continue
        where = f"line {n} (job {job_id})"
        before = len(errors)
        times: dict[str, float | None] = {}
        for name in ("Submit", "Start", "End"):
            try:
                times[name] = parse_time(cell(name))
            except ValueError:
                errors.append(InputError(source, f"not a time: {cell(name)!r}",
                                         element=where, field=name))
        if "Submit" in times and times["Submit"] is None:
            errors.append(InputError(source, "missing: every job record has its submit "
                                     "time", element=where, field="Submit"))
        reader = tres_gpus if gpu_field.endswith("TRES") else gres_gpus
        try:
            gpus = reader(cell(gpu_field))
        except ValueError as err:
            errors.append(InputError(source, str(err), element=where, field=gpu_field))
        if len(errors) > before:
            continue
        records.append(SacctRecord(
            where=where, job_id=job_id, name=cell("JobName"), partition=cell("Partition"),
            state=(cell("State").split() or [""])[0].upper(), submit=times["Submit"],
            start=times["Start"], end=times["End"], gpus=gpus,
            allocated=bool(cell(gpu_field)) if gpu_field == "AllocTRES" else None))
    _raise(errors)
    return records, steps, gpu_field


def _raise(errors: list[InputError]) -> None:
    if len(errors) > MAX_ERRORS:
        raise TraceErrors(errors[:MAX_ERRORS], len(errors) - MAX_ERRORS)
    raise_all(errors)


# ---- records -> jobs -------------------------------------------------------------------------

def why_left_out(record: SacctRecord) -> str | None:
    """The reason a record is no job of the simulation, None for a job. A job cancelled
    while pending is recorded with a start time (the cancel time, Elapsed 0): it never
    started when Slurm allocated it nothing, or (where the export does not say) when it
    ran less than a second."""
    r = record
    if r.start is None or r.state == "PENDING":
        return NEVER_STARTED
    if r.state == "CANCELLED" and (r.allocated is False or (
            r.allocated is None and r.end is not None and r.end - r.start < 1.0)):
        return NEVER_STARTED
    if r.end is None:
        return NOT_ENDED
    if not r.gpus:
        return NO_GPUS
    if r.end - r.start < 1.0:
        return ZERO_TIME
    return None


def sacct_jobs(records: Iterable[SacctRecord], source: str, *, form: str, gpu_field: str,
               steps: int = 0, assumptions: Iterable[Assumption] = ()) -> SacctTrace:
    """The JobSpecs of the records that ran with GPUs, and what was left out; InputError
    when no record is left (saying why, and naming the GPU field when no record of the
    export names a GPU at all)."""
    records = list(records)
    assumptions = tuple(assumptions)
    left: dict[str, list[str]] = {}
    kept: list[SacctRecord] = []
    for r in records:
        reason = why_left_out(r)
        if reason is None:
            kept.append(r)
        else:
            left.setdefault(reason, []).append(r.job_id)
    left_out = {reason: tuple(left[reason]) for reason in LEFT_OUT_REASONS if reason in left}
    if not kept:
        counts = "; ".join(f"{len(ids)} {LEFT_OUT_REASONS[reason]}"
                           for reason, ids in left_out.items())
        ran = [r for r in records if r.start is not None and r.end is not None]
        if ran and all(r.gpus is None for r in ran):
            raise InputError(source, f"no job names a GPU in {gpu_field} (no gres/gpu): "
                             "the cluster's accounting records GPUs only with "
                             "AccountingStorageTRES=gres/gpu in slurm.conf, and a GPU "
                             f"simulation needs them ({counts})", field=gpu_field)
        raise InputError(source, "no job of the export ran with GPUs"
                         + (f" ({counts})" if counts else ": no job records"))
    first = min(r.submit for r in kept)
    jobs = []
    names: dict[str, int] = {}
    for r in kept:
        duration = r.end - r.start
        got = assume(assumptions, partition=r.partition, name=r.name,
                     gpu_time_s=duration * r.gpus)
        name = f"sacct-{r.job_id}"
        names[name] = names.get(name, 0) + 1
        if names[name] > 1:                   # a job id recorded twice (sacct -D)
            name = f"{name}-{names[name]}"
        jobs.append(JobSpec(
            name=name, model=got.model,
            dataset_size=got.batch_size * r.gpus * max(1, round(duration)), epochs=1,
            batch_size=got.batch_size, max_gpus=r.gpus, arrival=r.submit - first,
            num_ps=got.num_ps, trace_gpus=r.gpus, trace_duration=duration,
            extra={"job_id": r.job_id, "job_name": r.name, "partition": r.partition,
                   "state": r.state, "assumption": got.label, "where": r.where}))
    return SacctTrace(source=source, form=form, gpu_field=gpu_field, jobs=jobs,
                      left_out=left_out, steps=steps)


def parse_sacct(text: str, source: str,
                assumptions: Iterable[Assumption] = ()) -> SacctTrace:
    """An export's text (either shape) as a SacctTrace."""
    if text.lstrip().startswith("{"):
        return sacct_jobs(parse_sacct_json(text, source), source, form="json",
                          gpu_field=JSON_GPU_FIELD, assumptions=assumptions)
    records, steps, gpu_field = parse_sacct_parsable(text, source)
    return sacct_jobs(records, source, form="parsable2", gpu_field=gpu_field, steps=steps,
                      assumptions=assumptions)


def load_sacct(path: str | Path, assumptions: Iterable[Assumption] = ()) -> SacctTrace:
    """Read an export file (the one I/O here)."""
    return parse_sacct(read_user_text(path), str(path), assumptions)


def looks_like_parsable(first_line: str) -> bool:
    """Whether a file's first line is a sacct --parsable2 header."""
    return "|" in first_line and "JobID" in {h.strip() for h in first_line.split("|")}
