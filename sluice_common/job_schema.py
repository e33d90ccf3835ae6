"""Typed model of the job file (pydantic): every problem in one run, and a JSON Schema.

Modelled fields, per job: name, model | layers (conv: c_in, c_out, k; fc: h, w, c_in,
c_out), dataset_size, epochs, batch_size, max_gpus, arrival, num_ps, slurm (account, qos,
time, partition, constraint, gpu_type, cpus_per_gpu, mem_per_gpu). Adding a field is
one line in :class:`JobModel` (and one in ``JobSpec`` for the code that uses it).
``sluice schema jobs`` prints :func:`json_schema`; ``schemas/jobs.schema.json`` is the
shipped copy editors read (a test keeps it equal to this model).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from sluice_common.errors import InputError, RuleBroken
from sluice_common.job_id import JOB_ID_PATTERN, JOB_ID_RULE, is_job_id
from sluice_common.validation import validate_document

Count = Annotated[StrictInt, Field(ge=1)]

# Upper bounds of every number of a job (documented in the JSON Schema and docs/api.md):
# far beyond any real training job, and low enough that a job's work, C(n) and the
# Lyapunov queues stay finite numbers the scheduler can compare (an unbounded dataset
# once left Q at 1.3e19).
MAX_DATASET_SIZE = 10**10        # samples per epoch (LAION-5B is 5.85e9)
MAX_EPOCHS = 100_000
MAX_BATCH_SIZE = 1_000_000
MAX_GPUS = 100_000
MAX_NUM_PS = 1_024
MAX_ARRIVAL = 31_536_000.0       # one year, in seconds
MAX_CHANNELS = 1_000_000         # a layer's c_in / c_out
MAX_KERNEL = 1_024               # a convolution's K
MAX_FC_SIDE = 100_000            # a fully connected layer's H / W
# Slurm values a job may set (the same rules as slurm_client.site, which the scheduler's
# own options go through)
SLURM_NAME = r"^[A-Za-z0-9_.\-]+$"
SLURM_TIME = r"^(\d+(:\d{1,2}){0,2}|\d+-\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE)$"
SLURM_MEMORY = r"^\d+[KMGTkmgt]?$"
SLURM_CONSTRAINT = r"^[A-Za-z0-9_.\-&|,\[\]()*:]+$"
_WORD = "a Slurm name (letters, digits, _ . -)"
SLURM_RULES = {"account": (_WORD, SLURM_NAME), "qos": (_WORD, SLURM_NAME),
               "partition": (_WORD, SLURM_NAME), "gpu_type": (_WORD, SLURM_NAME),
               "time": ("Slurm's time format (MINUTES, H:MM:SS, D-HH:MM:SS or UNLIMITED)",
                        SLURM_TIME),
               "constraint": ("node features joined by & | , [ ] ( ) *", SLURM_CONSTRAINT),
               "mem_per_gpu": ("a size like 16G or 16000 (MB)", SLURM_MEMORY)}


def _no_default(schema: dict) -> None:
    """An optional field without a value is left out: no `null` default in the schema."""
    schema.pop("default", None)


def _count(most: int, description: str | None = None):
    return Annotated[StrictInt, Field(ge=1, le=most, description=description)]


class _Strict(BaseModel):
    # strict: `epochs: "2"`, `epochs: true` and `epochs: 2.0` are mistakes, not 2.
    model_config = ConfigDict(extra="forbid", strict=True)


class ConvLayer(_Strict):
    """Convolution: C_in*C_out*K^2 parameters (eq. 2)."""
    type: Literal["conv"]
    c_in: _count(MAX_CHANNELS)
    c_out: _count(MAX_CHANNELS)
    k: _count(MAX_KERNEL) = Field(description="kernel size K")


class FcLayer(_Strict):
    """Fully connected: H*W*C_in*C_out parameters (eq. 3)."""
    type: Literal["fc"]
    h: _count(MAX_FC_SIDE) = Field(description="input height H")
    w: _count(MAX_FC_SIDE) = Field(description="input width W")
    c_in: _count(MAX_CHANNELS)
    c_out: _count(MAX_CHANNELS)


LAYER_MODELS = {"conv": ConvLayer, "fc": FcLayer}
LayerItem = Annotated[Union[ConvLayer, FcLayer], Field(discriminator="type")]


def _known_models() -> list[str]:
    from sluice_common.models import known_models   # (models imports jobspec.Layer)
    return list(known_models())


def _model_schema(schema: dict) -> None:
    """``model`` as the service takes it: a known model's name, or an alias of one, in
    any case and with any spaces, ``_`` and ``-`` (``sluice_common.models``), as a
    pattern (an ``enum`` of the canonical names would refuse ``ResNet-50``, which the
    service takes); the names are listed in the description and as ``examples``."""
    from sluice_common.models import _LOOKUP

    gap = r"[\s_-]*"

    def spelled(name: str) -> str:
        return gap.join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in name)
    schema.pop("default", None)
    names = sorted(_LOOKUP, key=lambda n: (-len(n), n))
    schema["pattern"] = f"^{gap}(" + "|".join(map(spelled, names)) + f"){gap}$"
    schema["examples"] = _known_models()
    schema["description"] = (f"a known model: {', '.join(_known_models())} (case, spaces, "
                             "_ and - are ignored); give this or `layers` (the network as "
                             "conv/fc layers)")


class SlurmModel(_Strict):
    """Per-job Slurm settings (``--executor slurm``): each replaces the scheduler's own
    ``--slurm-*`` option for this job; Slurm itself judges them at submission (a value
    Slurm refuses fails the job with Slurm's message)."""
    account: str = Field(None, json_schema_extra=_no_default, pattern=SLURM_NAME,
                         max_length=64, description="sbatch --account")
    qos: str = Field(None, json_schema_extra=_no_default, pattern=SLURM_NAME, max_length=64,
                     description="sbatch --qos")
    time: str = Field(None, json_schema_extra=_no_default, pattern=SLURM_TIME, max_length=32,
                      description="sbatch --time: MINUTES, H:MM:SS, D-HH:MM:SS or UNLIMITED")
    partition: str = Field(None, json_schema_extra=_no_default, pattern=SLURM_NAME,
                           max_length=64, description="sbatch --partition")
    constraint: str = Field(None, json_schema_extra=_no_default, pattern=SLURM_CONSTRAINT,
                            max_length=256, description="sbatch --constraint: node features")
    gpu_type: str = Field(None, json_schema_extra=_no_default, pattern=SLURM_NAME,
                          max_length=64, description="GPUs requested and counted as "
                          "gpu:TYPE:N (a100, h100, ...)")
    cpus_per_gpu: StrictInt = Field(None, json_schema_extra=_no_default, ge=1, le=4096,
                                    description="sbatch --cpus-per-gpu")
    mem_per_gpu: str = Field(None, json_schema_extra=_no_default, pattern=SLURM_MEMORY,
                             max_length=16, description="sbatch --mem-per-gpu: 16G, 16000 (MB)")

    @field_validator("account", "qos", "partition", "gpu_type", "time", "constraint",
                     "mem_per_gpu", mode="before")
    @classmethod
    def _slurm_words(cls, value: Any, info) -> Any:
        # Before the pattern constraint, so that the message states the rule in words.
        rule, pattern = SLURM_RULES[info.field_name]
        if isinstance(value, str) and not re.fullmatch(pattern, value):
            raise ValueError(f"{value!r} is not {rule}")
        return value


class JobModel(_Strict):
    """One PS training job."""
    model_config = ConfigDict(json_schema_extra={
        "oneOf": [{"required": ["model"]}, {"required": ["layers"]}]})

    name: str = Field(min_length=1, pattern=JOB_ID_PATTERN,
                      description=f"the job's name, unique within the file: {JOB_ID_RULE}; "
                      "a label: two live jobs may share it (the scheduler service knows "
                      "each by its job id, the controller as NAME.ID)")
    # (no null: a job without one of them leaves the key out; `model: null` is a mistake)
    model: str = Field(None, json_schema_extra=_model_schema)
    layers: Annotated[list[LayerItem], Field(min_length=1)] = Field(
        None, json_schema_extra=_no_default,
        description="the network as conv/fc layers; give this or `model`")
    dataset_size: _count(MAX_DATASET_SIZE) = Field(description="m: samples per epoch")
    epochs: _count(MAX_EPOCHS) = Field(description="e")
    batch_size: _count(MAX_BATCH_SIZE) = Field(description="b: samples per batch per worker")
    max_gpus: _count(MAX_GPUS) = Field(
        description="N: the most GPUs (workers) this job may get")
    arrival: float = Field(0.0, ge=0, le=MAX_ARRIVAL, allow_inf_nan=False,
                           description="seconds after the start of the run (`sluice run`, "
                           "`sluice simulate`) or after the submission (the scheduler "
                           "service): the job is not started, nor seen by the policy, "
                           "before")
    num_ps: _count(MAX_NUM_PS) = Field(1, description="parameter servers")
    slurm: SlurmModel = Field(None, json_schema_extra=_no_default,
                              description="Slurm settings of this job (--executor slurm)")

    @field_validator("name", mode="before")
    @classmethod
    def _job_id(cls, value: Any) -> Any:
        # Before the pattern constraint, so that the message states the rule in words.
        if isinstance(value, str) and not is_job_id(value):
            raise ValueError(f"{value!r} is not a job name: {JOB_ID_RULE}")
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        from sluice_common.models import canonical_name
        if value is None:
            return None
        name = canonical_name(value) if isinstance(value, str) else None
        if name is None:
            raise ValueError(f"unknown model {value!r} (known: {', '.join(_known_models())})")
        return name


class JobFile(_Strict):
    """A sluice job file."""
    model_config = ConfigDict(title="sluice job file")
    jobs: Annotated[list[JobModel], Field(min_length=1)]


JOB_FIELDS = set(JobModel.model_fields)


def _label(raw_jobs: Any, index: int) -> str:
    raw = raw_jobs[index] if isinstance(raw_jobs, list) and index < len(raw_jobs) else None
    name = raw.get("name") if isinstance(raw, dict) else None
    return f"job '{name}'" if isinstance(name, str) and name.strip() else f"job #{index + 1}"


def _locate(loc: tuple, data: Any) -> tuple[str | None, tuple]:
    if len(loc) >= 2 and loc[0] == "jobs" and isinstance(loc[1], int):
        rest = tuple(p for i, p in enumerate(loc[2:])   # drop the union's tag
                     if not (p in LAYER_MODELS and i >= 2 and isinstance(loc[2:][i - 1], int)))
        return _label(data.get("jobs"), loc[1]), rest
    return None, loc


def _allowed(prefix: tuple) -> str | None:
    if not prefix:
        return "jobs"
    nested = {**LAYER_MODELS, "slurm": SlurmModel}
    model = nested.get(prefix[-1]) if isinstance(prefix[-1], str) else None
    fields = model.model_fields if model else JobModel.model_fields
    return ", ".join(sorted(fields))


def _cross_checks(data: dict, source: str) -> list[InputError]:
    """What one field's type cannot say: exactly one of model/layers; unique names."""
    out: list[InputError] = []
    seen: set[str] = set()
    raw_jobs = data.get("jobs") if isinstance(data, dict) else None
    for i, raw in enumerate(raw_jobs if isinstance(raw_jobs, list) else []):
        if not isinstance(raw, dict):
            continue
        if ("model" in raw) == ("layers" in raw):
            out.append(InputError(source, "give exactly one of 'model' (a known model) or "
                                  "'layers'", element=_label(raw_jobs, i), field="model"))
        name = raw.get("name")
        if isinstance(name, str) and name.strip():
            if name in seen:
                out.append(RuleBroken(source, "duplicate job name", element=f"job '{name}'",
                                      field="name"))
            seen.add(name)
    return out


def validate_job_file(data: Any, source: str) -> tuple[JobFile | None, list[InputError]]:
    """The validated file, or None with every problem found."""
    if not isinstance(data, dict):
        return None, [InputError(source, "a job file must be a YAML mapping with a top-level "
                                 f"'jobs:' list, got {type(data).__name__}")]
    return validate_document(JobFile, data, source, _locate, _allowed, _cross_checks)


def json_schema() -> dict:
    schema = JobFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
