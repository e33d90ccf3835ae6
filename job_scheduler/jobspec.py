"""The job description: one YAML format for the scheduler, the simulator and the launcher.

    jobs:
      - name: resnet-a
        model: resnet18          # a known model, or `layers:` (conv/fc list, eq. 2 and 3)
        dataset_size: 50000      # m, samples
        epochs: 2                # e
        batch_size: 32           # b
        max_gpus: 4
        arrival: 0               # optional, seconds
        num_ps: 1                # optional

(Loading and validation: see ``load_jobs`` / ``parse_jobs`` in this module.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sluice.errors import InputError


@dataclass(frozen=True)
class Layer:
    kind: str                 # "conv" or "fc"
    c_in: int
    c_out: int
    k: int = 1                # conv kernel size K
    h: int = 1                # fc input height H
    w: int = 1                # fc input width W


@dataclass(frozen=True)
class JobSpec:
    name: str
    model: str                     # model-table name, or "custom" when `layers` is given
    dataset_size: int              # m
    epochs: int                    # e
    batch_size: int                # b
    max_gpus: int
    arrival: float = 0.0
    num_ps: int = 1
    layers: tuple[Layer, ...] | None = None
    # Trace-driven jobs only: GPU count and duration recorded in the trace, so that a
    # policy that changes the GPU count can rescale the duration through C(n).
    trace_gpus: int | None = None
    trace_duration: float | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


# ---- loading and validation ------------------------------------------------------------

JOB_FIELDS = {"name", "model", "layers", "dataset_size", "epochs", "batch_size", "max_gpus",
              "arrival", "num_ps"}
LAYER_FIELDS = {"conv": ("c_in", "c_out", "k"), "fc": ("h", "w", "c_in", "c_out")}


def _keys(raw: dict) -> str:
    return ", ".join(sorted(map(str, raw)))


def _check_fields(source: str, label: str, raw: dict, allowed: set[str], prefix: str = "") -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise InputError(source, f"unknown field (allowed: {', '.join(sorted(allowed))})",
                         element=label, field=prefix + unknown[0])


def _int_field(source: str, label: str, raw: dict, key: str, minimum: int,
               prefix: str = "", default: int | None = None) -> int:
    if key not in raw:
        if default is not None:
            return default
        raise InputError(source, "missing", element=label, field=prefix + key)
    value = raw[key]
    # bool is a subclass of int in Python, but `epochs: true` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(source, f"must be an integer, got {value!r}", element=label,
                         field=prefix + key)
    if value < minimum:
        raise InputError(source, f"must be >= {minimum}, got {value}", element=label,
                         field=prefix + key)
    return value


def _parse_layers(source: str, label: str, raw: Any) -> tuple[Layer, ...]:
    if not isinstance(raw, list) or not raw:
        raise InputError(source, "must be a non-empty list of {type: conv|fc, ...} layers",
                         element=label, field="layers")
    layers = []
    for i, item in enumerate(raw):
        prefix = f"layers[{i}]."
        if not isinstance(item, dict):
            raise InputError(source, f"a layer must be a mapping, got {type(item).__name__}",
                             element=label, field=f"layers[{i}]")
        kind = item.get("type")
        if not isinstance(kind, str) or kind not in LAYER_FIELDS:
            raise InputError(source, f"must be 'conv' or 'fc', got {kind!r}", element=label,
                             field=prefix + "type")
        _check_fields(source, label, item, {"type", *LAYER_FIELDS[kind]}, prefix)
        values = {k: _int_field(source, label, item, k, 1, prefix) for k in LAYER_FIELDS[kind]}
        layers.append(Layer(kind, **values))
    return tuple(layers)


def parse_job(raw: Any, source: str, index: int) -> JobSpec:
    """One job mapping -> JobSpec. ``index`` is 0-based; messages say ``job #index+1``."""
    from job_scheduler.models import canonical_name, known_models  # (models imports Layer)

    if not isinstance(raw, dict):
        raise InputError(source, f"a job must be a mapping, got {type(raw).__name__}",
                         element=f"job #{index + 1}")
    name = raw.get("name")
    label = f"job '{name}'" if isinstance(name, str) and name else f"job #{index + 1}"
    _check_fields(source, label, raw, JOB_FIELDS)
    if "name" not in raw:
        raise InputError(source, "missing", element=label, field="name")
    if not isinstance(name, str) or not name.strip():
        raise InputError(source, f"must be a non-empty string, got {name!r}", element=label,
                         field="name")

    has_model, has_layers = "model" in raw, "layers" in raw
    if has_model == has_layers:
        raise InputError(source, "give exactly one of 'model' (a known model) or 'layers'",
                         element=label, field="model")
    layers = None
    if has_model:
        model = canonical_name(raw["model"])
        if model is None:
            raise InputError(source, f"unknown model {raw['model']!r} "
                             f"(known: {', '.join(known_models())})", element=label, field="model")
    else:
        model = "custom"
        layers = _parse_layers(source, label, raw["layers"])

    ints = {k: _int_field(source, label, raw, k, 1)
            for k in ("dataset_size", "epochs", "batch_size", "max_gpus")}
    num_ps = _int_field(source, label, raw, "num_ps", 1, default=1)
    arrival = raw.get("arrival", 0.0)
    if isinstance(arrival, bool) or not isinstance(arrival, (int, float)):
        raise InputError(source, f"must be a number of seconds, got {arrival!r}", element=label,
                         field="arrival")
    if not math.isfinite(arrival) or arrival < 0:
        raise InputError(source, f"must be a finite number >= 0, got {arrival!r}",
                         element=label, field="arrival")
    return JobSpec(name=name, model=model, arrival=float(arrival), num_ps=num_ps,
                   layers=layers, **ints)


def parse_jobs(data: Any, source: str = "<jobs>") -> list[JobSpec]:
    """Validate a decoded YAML document (``{jobs: [...]}``) and return every job.

    The whole document is checked before anything is returned; the first problem raises
    :class:`InputError` naming the source, the job (``job 'name'`` or ``job #3``) and
    the field."""
    if not isinstance(data, dict):
        raise InputError(source, "a job file must be a YAML mapping with a top-level "
                         f"'jobs:' list, got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k != "jobs")
    if unknown:
        raise InputError(source, "unknown top-level field (only 'jobs' is allowed)",
                         field=unknown[0])
    raw_jobs = data.get("jobs")
    if not isinstance(raw_jobs, list) or not raw_jobs:
        raise InputError(source, "must be a non-empty list of jobs", field="jobs")
    jobs = [parse_job(raw, source, i) for i, raw in enumerate(raw_jobs)]
    seen: set[str] = set()
    for job in jobs:
        if job.name in seen:
            raise InputError(source, "duplicate job name", element=f"job '{job.name}'",
                             field="name")
        seen.add(job.name)
    return jobs


def load_jobs(path: str | Path) -> list[JobSpec]:
    """Read and validate a job YAML file (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(str(path), f"cannot read: {err.strerror or err}")
    except UnicodeDecodeError as err:
        raise InputError(str(path), f"not UTF-8 text: {err.reason} at byte {err.start}")
    return parse_jobs_text(text, str(path))


def parse_jobs_text(text: str, source: str = "<jobs>") -> list[JobSpec]:
    """Parse YAML text (a file's content or an API body) into jobs."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(source, f"not valid YAML: {' '.join(str(err).split())}")
    except RecursionError:
        raise InputError(source, "not valid YAML: nested too deeply")
    return parse_jobs(data, source)


def job_to_dict(job: JobSpec) -> dict[str, Any]:
    """The YAML mapping that ``parse_job`` turns back into ``job`` (for writers/APIs)."""
    out: dict[str, Any] = {"name": job.name}
    if job.layers is not None:
        out["layers"] = [{"type": l.kind, **{k: getattr(l, k) for k in LAYER_FIELDS[l.kind]}}
                         for l in job.layers]
    else:
        out["model"] = job.model
    out.update(dataset_size=job.dataset_size, epochs=job.epochs, batch_size=job.batch_size,
               max_gpus=job.max_gpus, arrival=job.arrival, num_ps=job.num_ps)
    return out
