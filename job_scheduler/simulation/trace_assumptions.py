"""What a trace does not record, and where the simulator takes it from instead.

A trace (Philly, a site's own ``sacct`` export) records when a job came, how many GPUs it
held and for how long, but not the model it trained, its batch size or its PS count, and
those decide the bytes it exchanges. Each job therefore gets them from one assumption,
named on the job (``extra["assumption"]``) so that every report can say which it used:

- the default (:data:`DEFAULT_LABEL`): the Philly rule, the model by GPU-time class
  (:func:`philly_model`), batch size :data:`TRACE_BATCH_SIZE`, one PS;
- an entry of an assumptions file, matched on the job's partition and/or name (shell
  patterns: ``gpu*``, ``bert-*``); the first entry that matches wins, and what it does not
  set comes from the default::

      assumptions:
        - {partition: gpu, model: resnet50, batch_size: 64}
        - {name: "bert-*", model: vgg16, num_ps: 2}

  (a bare list of entries is read the same). Bad entries raise one InputError per
  problem, each naming the file, the entry and the field.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Iterable

import yaml

from sluice_common.errors import InputError, raise_all, read_user_text
# the job schema's bounds: a trace job is a job like any other
from sluice_common.job_schema import MAX_BATCH_SIZE, MAX_NUM_PS
from sluice_common.models import canonical_name, known_models

TRACE_BATCH_SIZE = 32
# (upper bound of GPU-time in GPU-hours, model): bigger jobs get the models with more
# parameters, so long jobs are also the communication-heavy ones.
PHILLY_MODEL_CLASSES = ((1.0, "resnet18"), (10.0, "googlenet"), (100.0, "alexnet"),
                        (math.inf, "vgg16"))
DEFAULT_LABEL = "default (Philly rule: GPU-time)"
MATCH_KEYS = ("partition", "name")
SET_KEYS = ("model", "batch_size", "num_ps")


def philly_model(gpu_time_s: float) -> str:
    """The model of a job that held ``gpu_time_s`` GPU-seconds: < 1 GPU-hour ResNet18,
    < 10 GoogLeNet, < 100 AlexNet, otherwise VGG16."""
    hours = gpu_time_s / 3600.0
    return next((model for bound, model in PHILLY_MODEL_CLASSES if hours < bound),
                PHILLY_MODEL_CLASSES[-1][1])


@dataclass(frozen=True)
class Assumption:
    """One entry: what it matches (None: anything) and what it sets (None: the default)."""
    partition: str | None = None
    name: str | None = None
    model: str | None = None
    batch_size: int | None = None
    num_ps: int | None = None

    @property
    def label(self) -> str:
        return " ".join(f"{k}={getattr(self, k)}" for k in MATCH_KEYS
                        if getattr(self, k) is not None)

    def matches(self, partition: str, name: str) -> bool:
        return ((self.partition is None or fnmatchcase(partition, self.partition))
                and (self.name is None or fnmatchcase(name, self.name)))


@dataclass(frozen=True)
class Assumed:
    """What one job got: the assumption's label, and the values."""
    label: str
    model: str
    batch_size: int
    num_ps: int


def assume(assumptions: Iterable[Assumption], *, partition: str, name: str,
           gpu_time_s: float) -> Assumed:
    """The first entry matching the job, its gaps filled by the default; the default
    alone when none matches."""
    entry = next((a for a in assumptions if a.matches(partition, name)), None)
    if entry is None:
        return Assumed(DEFAULT_LABEL, philly_model(gpu_time_s), TRACE_BATCH_SIZE, 1)
    return Assumed(entry.label, entry.model or philly_model(gpu_time_s),
                   entry.batch_size or TRACE_BATCH_SIZE, entry.num_ps or 1)


def _count(value: Any, top: int, where: str, field: str, source: str,
           errors: list[InputError]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        errors.append(InputError(source, f"must be an integer in [1, {top}], got {value!r}",
                                 element=where, field=field))
        return None
    return value


def _entry(raw: Any, where: str, source: str, errors: list[InputError]) -> Assumption | None:
    if not isinstance(raw, dict):
        errors.append(InputError(source, f"must be a mapping, got {type(raw).__name__}",
                                 element=where))
        return None
    before = len(errors)
    for key in raw:
        if key not in MATCH_KEYS + SET_KEYS:
            errors.append(InputError(source, f"unknown field (known: "
                                     f"{', '.join(MATCH_KEYS + SET_KEYS)})",
                                     element=where, field=str(key)))
    if not any(k in raw for k in MATCH_KEYS):
        errors.append(InputError(source, "says which jobs it is for by partition and/or "
                                 "name (a shell pattern; \"*\" for every job)",
                                 element=where, field="partition"))
    if not any(k in raw for k in SET_KEYS):
        errors.append(InputError(source, f"sets nothing: give one of {', '.join(SET_KEYS)}",
                                 element=where, field="model"))
    for key in MATCH_KEYS:
        if key in raw and (not isinstance(raw[key], str) or not raw[key]):
            errors.append(InputError(source, f"must be a non-empty string, got {raw[key]!r}",
                                     element=where, field=key))
    model = raw.get("model")
    if model is not None:
        model = canonical_name(model)
        if model is None:
            errors.append(InputError(source, f"unknown model {raw['model']!r} (known: "
                                     f"{', '.join(known_models())})", element=where,
                                     field="model"))
    batch = (None if raw.get("batch_size") is None else
             _count(raw["batch_size"], MAX_BATCH_SIZE, where, "batch_size", source, errors))
    num_ps = (None if raw.get("num_ps") is None else
              _count(raw["num_ps"], MAX_NUM_PS, where, "num_ps", source, errors))
    if len(errors) > before:
        return None
    return Assumption(partition=raw.get("partition"), name=raw.get("name"), model=model,
                      batch_size=batch, num_ps=num_ps)


def parse_assumptions(data: Any, source: str) -> tuple[Assumption, ...]:
    """A decoded assumptions document (``{assumptions: [...]}`` or the bare list), every
    problem of it at once."""
    entries = data
    if isinstance(data, dict):
        extra = sorted(str(k) for k in data if k != "assumptions")
        if extra:
            raise InputError(source, "unknown top-level field (known: assumptions)",
                             field=extra[0])
        entries = data.get("assumptions")
    if not isinstance(entries, list) or not entries:
        raise InputError(source, "must be a non-empty list of entries (or a mapping "
                         "with one: assumptions)", field="assumptions")
    errors: list[InputError] = []
    out: list[Assumption] = []
    seen: dict[tuple, int] = {}
    for i, raw in enumerate(entries, 1):
        where = f"entry {i}"
        entry = _entry(raw, where, source, errors)
        if entry is None:
            continue
        key = (entry.partition, entry.name)
        if key in seen:
            errors.append(InputError(source, f"matches the same jobs as entry {seen[key]}, "
                                     "which wins: it would never apply", element=where,
                                     field="partition" if entry.partition else "name"))
            continue
        seen[key] = i
        out.append(entry)
    raise_all(errors)
    return tuple(out)


def load_assumptions(path: str | Path) -> tuple[Assumption, ...]:
    """Read and check an assumptions YAML file."""
    source = str(path)
    text = read_user_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise InputError(source, f"not YAML: {getattr(err, 'problem', None) or err}",
                         element=f"line {mark.line + 1}" if mark else None)
    return parse_assumptions(data, source)


# ---- what a workload used ----------------------------------------------------------------

def assumption_summary(jobs: Iterable) -> dict[str, int]:
    """How many jobs used each assumption (``extra["assumption"]``), most used first;
    jobs that record none (generated workloads, job files: nothing was assumed) are not
    counted."""
    counts = Counter(j.extra["assumption"] for j in jobs if "assumption" in j.extra)
    return dict(counts.most_common())


def assumption_lines(jobs: Iterable) -> list[str]:
    """The summary as lines a report prints: per assumption, its jobs and what they got
    (models, batch sizes, PS counts, each with its job count)."""
    jobs = [j for j in jobs if "assumption" in j.extra]
    out = []
    for label, count in assumption_summary(jobs).items():
        mine = [j for j in jobs if j.extra["assumption"] == label]

        def tally(values) -> str:
            return ", ".join(f"{v} x{n}" for v, n in Counter(values).most_common())
        out.append(f"{count} job(s) by {label}: model {tally(j.model for j in mine)}; "
                   f"batch_size {tally(j.batch_size for j in mine)}; "
                   f"num_ps {tally(j.num_ps for j in mine)}")
    return out
