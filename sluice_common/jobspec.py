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
                   arrival=float(job.arrival), num_ps=job.num_ps, layers=layers)


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


def _expanded_size(node: yaml.Node, limit: int, source: str) -> int:
    """Nodes of the document ``node`` stands for, aliases expanded (each node's size
    counted once: O(distinct nodes)); InputError once over ``limit``."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        known = sizes.get(id(n))
        if known is not None:
            return known
        sizes[id(n)] = 1           # a recursive alias counts once (PyYAML refuses it later)
        total = 1
        if isinstance(n, yaml.SequenceNode):
            for child in n.value:
                total += size(child)
        elif isinstance(n, yaml.MappingNode):
            for key, value in n.value:
                total += size(key) + size(value)
        if total > limit:
            raise InputError(source, f"the document expands (YAML aliases) to more than "
                             f"{limit} values; write the jobs out")
        sizes[id(n)] = total
        return total

    return size(node)


def _jobs_node(node: yaml.Node) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "jobs":
                return value
    return None


def parse_jobs_text(text: str, source: str = "<jobs>", max_jobs: int | None = None
                    ) -> list[JobSpec]:
    """Parse YAML text (a file's content or an API body) into jobs. Aliases may expand
    to at most MAX_YAML_NODES values and the file to at most ``max_jobs`` jobs, both
    checked on the parsed document before any value is built or validated."""
    loader = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is not None:
            _expanded_size(node, MAX_YAML_NODES, source)
            jobs = _jobs_node(node)
            if (max_jobs is not None and isinstance(jobs, yaml.SequenceNode)
                    and len(jobs.value) > max_jobs):
                raise InputError(source, f"at most {max_jobs} jobs per file, got "
                                 f"{len(jobs.value)}", field="jobs")
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
    return out
