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

from sluice_common.errors import InputError, raise_all
from sluice_common.models import Layer  # noqa: F401 (part of the job description)


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
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(str(path), f"cannot read: {err.strerror or err}")
    except UnicodeDecodeError as err:
        raise InputError(str(path), f"not UTF-8 text: {err.reason} at byte {err.start}")
    return parse_jobs_text(text, str(path))


# libyaml's parser when PyYAML has it (7x faster on a 10,000-job file)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# A job file with aliases is read as the document they expand to; its size is capped
# before anything is built (a few KB of nested aliases can stand for billions of values).
MAX_YAML_NODES = 1_000_000


def _check_events(loader, limit: int, max_jobs: int | None, source: str) -> None:
    """One pass over the parser's events, before any node is built: InputError once the
    document, aliases expanded, passes ``limit`` values, or once the top-level ``jobs``
    list passes ``max_jobs`` items (a refused 1 MiB file costs its events, not the ~60
    MiB of its node graph). An anchor's values count once per alias to it; an alias to
    a node still open (recursive) counts once."""
    anchors: dict[str, tuple[int, int]] = {}   # anchor -> (values, direct items)
    stack: list[list] = []      # open collections: [values, items, anchor, is_jobs]
    expanded = 0                # values so far, aliases expanded
    in_root_map = False         # the document is a mapping (its entries: key, value, ...)
    root_entries = 0
    jobs_next = False           # the root mapping's last key was `jobs`

    def too_many_jobs(got: str) -> InputError:
        return InputError(source, f"at most {max_jobs} jobs per file, got {got}",
                          field="jobs")

    def add(values: int, new: int) -> None:
        """A closed node of ``values`` values (``new`` of them not counted yet)."""
        nonlocal expanded
        expanded += new
        if expanded > limit:
            raise InputError(source, f"the document expands (YAML aliases) to more than "
                             f"{limit} values; write the jobs out")
        if stack:
            stack[-1][0] += values
            stack[-1][1] += 1
            if stack[-1][3] and max_jobs is not None and stack[-1][1] > max_jobs:
                raise too_many_jobs("more")

    while not loader.check_event(yaml.StreamEndEvent):
        event = loader.get_event()
        root_entry = in_root_map and len(stack) == 1 and isinstance(
            event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent))
        is_value_of_jobs = root_entry and root_entries % 2 == 1 and jobs_next
        if root_entry:
            jobs_next = (root_entries % 2 == 0 and isinstance(event, yaml.ScalarEvent)
                         and event.value == "jobs")
            root_entries += 1
        if isinstance(event, yaml.CollectionStartEvent):
            if not stack:
                in_root_map, root_entries = isinstance(event, yaml.MappingStartEvent), 0
            stack.append([1, 0, event.anchor,
                          is_value_of_jobs and isinstance(event, yaml.SequenceStartEvent)])
        elif isinstance(event, yaml.CollectionEndEvent):
            values, items, anchor, _ = stack.pop()
            if anchor:
                anchors[anchor] = (values, items)
            add(values, 1)              # its contents were counted as they came
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                anchors[event.anchor] = (1, 0)
            add(1, 1)
        elif isinstance(event, yaml.AliasEvent):
            values, items = anchors.get(event.anchor, (1, 0))
            if is_value_of_jobs and max_jobs is not None and items > max_jobs:
                raise too_many_jobs(str(items))
            add(values, values)


def parse_jobs_text(text: str, source: str = "<jobs>", max_jobs: int | None = None
                    ) -> list[JobSpec]:
    """Parse YAML text (a file's content or an API body) into jobs. Aliases may expand
    to at most MAX_YAML_NODES values and the file to at most ``max_jobs`` jobs, both
    checked on the parser's events (a first, cheap pass) before any node is built."""
    loader = None
    try:
        loader = _Loader(text)
        _check_events(loader, MAX_YAML_NODES, max_jobs, source)
        loader.dispose()
        loader = _Loader(text)
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as err:
        raise InputError(source, f"not valid YAML: {' '.join(str(err).split())}")
    except RecursionError:
        raise InputError(source, "not valid YAML: nested too deeply")
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
