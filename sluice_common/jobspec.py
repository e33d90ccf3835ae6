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
        slurm:                   # optional, --executor slurm: this job's own settings
          account: physics       #   (also qos, time, partition, constraint, gpu_type,
          time: "2:00:00"        #    cpus_per_gpu, mem_per_gpu)

(Loading and validation: see ``load_jobs`` / ``parse_jobs`` in this module.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sluice_common.body_bounds import LIMITS, BoundsError, YamlEventBounds
from sluice_common.errors import InputError, raise_all, read_user_text
from sluice_common.models import Layer


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
    # the job's `slurm:` settings as sorted (field, value) pairs (hashable; a mapping or
    # the JSON store's [[field, value], ...] is turned into them)
    slurm: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        pairs = self.slurm.items() if isinstance(self.slurm, dict) else (self.slurm or ())
        object.__setattr__(self, "slurm", tuple(sorted((str(k), v) for k, v in pairs)))


# ---- loading and validation ------------------------------------------------------------
# The checks live in the typed model (job_schema.py), which reports every problem at once.

LAYER_FIELDS = {"conv": ("c_in", "c_out", "k"), "fc": ("h", "w", "c_in", "c_out")}


def _to_spec(job) -> JobSpec:
    layers = None
    if job.layers is not None:
        layers = tuple(Layer(l.type, **{k: getattr(l, k) for k in LAYER_FIELDS[l.type]})
                       for l in job.layers)
    return JobSpec(name=job.name, model=job.model or "custom", dataset_size=job.dataset_size,
                   epochs=job.epochs, batch_size=job.batch_size, max_gpus=job.max_gpus,
                   arrival=float(job.arrival), num_ps=job.num_ps, layers=layers,
                   slurm=job.slurm.model_dump(exclude_none=True) if job.slurm else ())


def parse_job(raw: Any, source: str, index: int = 0) -> JobSpec:
    """One job mapping -> JobSpec (the same checks as a file with this one job)."""
    return parse_jobs({"jobs": [raw]}, source)[0]


def parse_jobs(data: Any, source: str = "<jobs>") -> list[JobSpec]:
    """Validate a decoded YAML document (``{jobs: [...]}``) and return every job.

    The whole document is checked before anything is returned. Problems raise
    :class:`InputError` naming the source, the job (``job 'name'`` or ``job #3``) and
    the field; several problems raise :class:`InputErrors` listing all of them."""
    from sluice_common.job_schema import validate_job_file
    parsed, errors = validate_job_file(data, source)
    raise_all(errors)
    return [_to_spec(job) for job in parsed.jobs]


def load_jobs(path: str | Path) -> list[JobSpec]:
    """Read and validate a job YAML file (see the module docstring)."""
    return parse_jobs_text(read_user_text(path), str(path))


# libyaml's parser when PyYAML has it (7x faster on a 10,000-job file)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# A job file is walked on its parser's events before anything is built: its depth, its
# size with aliases expanded (a few KB of nested aliases can stand for billions of
# values), its strings and numbers are bounded (sluice_common.body_bounds), and so is its
# number of jobs.
MAX_YAML_NODES = LIMITS.values


def _check_events(loader, max_jobs: int | None, source: str) -> None:
    """One pass over the parser's events, before any node is built: InputError once the
    document passes a bound of :data:`LIMITS` (a refused 1 MiB file costs its events,
    not the ~60 MiB of its node graph, and a 50,000-deep one never reaches the
    recursive composer), or once the top-level ``jobs`` list passes ``max_jobs`` items."""
    walker = YamlEventBounds(loader, LIMITS)
    root_entries = 0            # entries of the root mapping so far (key, value, ...)
    jobs_next = False           # the root mapping's last key was `jobs`
    jobs_list = None            # the open `jobs:` sequence (the walker's stack entry)
    jobs_depth = 0
    try:
        while not loader.check_event(yaml.StreamEndEvent):
            event = loader.get_event()
            at_root = (len(walker.stack) == 1 and walker.stack[0][4]
                       and isinstance(event, _NODE_EVENTS))
            ended = walker.event(event)
            if at_root:
                is_jobs_value = root_entries % 2 == 1 and jobs_next
                jobs_next = (root_entries % 2 == 0 and isinstance(event, yaml.ScalarEvent)
                             and event.value == "jobs")
                root_entries += 1
                if is_jobs_value and isinstance(event, yaml.SequenceStartEvent):
                    jobs_list, jobs_depth = walker.stack[-1], len(walker.stack)
                elif is_jobs_value and ended is not None:
                    _at_most(max_jobs, ended[1], source)        # an alias to a list
            if jobs_list is not None:
                _at_most(max_jobs, jobs_list[1], source)
                if len(walker.stack) < jobs_depth:          # the list ended
                    jobs_list = None
    except BoundsError as err:
        raise InputError(source, f"refused before parsing: {err.reason}")


_NODE_EVENTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)


def _at_most(max_jobs: int | None, items: int, source: str) -> None:
    if max_jobs is not None and items > max_jobs:
        raise InputError(source, f"at most {max_jobs} jobs per file, got {items}",
                         field="jobs")


def parse_jobs_text(text: str, source: str = "<jobs>", max_jobs: int | None = None
                    ) -> list[JobSpec]:
    """Parse YAML text (a file's content or an API body) into jobs. The document's shape
    (depth, values with aliases expanded, strings, numbers: body_bounds.LIMITS) and its
    number of jobs (``max_jobs``) are checked on the parser's events (a first, cheap
    pass that never recurses) before any node is built."""
    loader = None
    try:
        loader = _Loader(text)
        _check_events(loader, max_jobs, source)
        loader.dispose()
        loader = _Loader(text)
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except InputError:
        raise
    except yaml.YAMLError as err:
        raise InputError(source, f"not valid YAML: {' '.join(str(err).split())}")
    except RecursionError:
        raise InputError(source, "not valid YAML: nested too deeply")
    except (ValueError, TypeError, OverflowError) as err:
        # a tagged scalar the constructor cannot make (`!!timestamp 2020-13-45`,
        # `!!binary` that is not base64) or a mapping key it cannot hash
        raise InputError(source, f"not valid YAML: {' '.join(str(err).split())[:300]}")
    finally:
        if loader is not None and hasattr(loader, "dispose"):
            loader.dispose()
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
    if job.slurm:
        out["slurm"] = dict(job.slurm)
    return out
