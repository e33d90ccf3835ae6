"""Compute profiles: ``Cost_bat(1)`` and ``alpha(b)`` per device and model.

File format (YAML; ``save_profile`` writes it, ``sluice profile`` produces it)::

    device: p100                 # one device per file, or several under `devices:`
    source: "how the numbers were obtained"
    models:
      resnet50:                  # canonical model name or any alias (models.py)
        points: {1: 0.0375, 2: 0.0421, 8: 0.0657}   # batch size b -> seconds per batch
        source: "optional per-model note"

    # or, several devices in one file:
    default_device: p100
    devices:
      p100: {source: ..., models: {...}}
      cpu:  {source: ..., models: {...}}

``points`` are measured (or derived, see the shipped file's header) seconds per
training iteration (forward + backward + optimizer step) of ONE device on a batch of b
samples. A point at b = 1 is required: it is ``Cost_bat(1)``.

Why ``alpha(b) = 1 + beta * (b - 1) ** gamma`` (fitted by weighted least squares):
alpha(1) = 1 holds by construction; gamma < 1 captures a GPU that batches work more
cheaply than linearly, gamma = 1 a device that is already saturated at b = 1 (a CPU);
two parameters fit the 3-8 points a profiling run gives without overfitting, and the
form stays monotone and extrapolates sanely beyond the largest measured batch, which a
piecewise-linear interpolation would not. Residuals are weighted by 1/alpha^2, i.e.
relative error, because the points span orders of magnitude. With a single point
(b = 1 only), alpha(b) = b is assumed: the conservative "no batching gain" reading.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from sluice_common.errors import InputError
from sluice_common.models import MODELS, canonical_name

_DATA = Path(__file__).parent / "data"
# Shipped profiles by name (``--profile NAME`` or a file). Measured beats derived: the
# default is the one measured on an H100; the P100 one is derived from published figures.
NAMED_PROFILES = {"h100": _DATA / "h100_profile.yaml", "p100": _DATA / "p100_profile.yaml"}
DEFAULT_PROFILE_NAME = "h100"
PROFILE_ENV = "SLUICE_PROFILE"      # the profile used where a command is given none
DEFAULT_PROFILE_PATH = NAMED_PROFILES[DEFAULT_PROFILE_NAME]
P100_PROFILE_PATH = NAMED_PROFILES["p100"]
_GAMMA_GRID = np.arange(0.05, 2.0001, 0.005)


def fit_alpha(points: Mapping[int, float]) -> tuple[float, float]:
    """(beta, gamma) of alpha(b) = 1 + beta*(b-1)**gamma fitted to ``{b: seconds}``.

    For each gamma on a fine grid beta has a closed form (weighted linear least squares
    through the origin in x = (b-1)**gamma, y = alpha - 1); keep the best pair."""
    t1 = points[1]
    bs = np.array([b for b in points if b > 1], dtype=float)
    if bs.size == 0:
        return 1.0, 1.0
    alpha = np.array([points[int(b)] / t1 for b in bs])
    y = alpha - 1.0
    w = 1.0 / alpha ** 2
    x = (bs[None, :] - 1.0) ** _GAMMA_GRID[:, None]            # (grid, points)
    beta = np.maximum((w * x * y).sum(1) / (w * x * x).sum(1), 0.0)
    err = (w * (y - beta[:, None] * x) ** 2).sum(1)
    i = int(np.argmin(err))
    return float(beta[i]), float(_GAMMA_GRID[i])


@dataclass(frozen=True)
class ModelProfile:
    model: str
    points: dict[int, float]            # b -> seconds per batch
    source: str = ""

    @property
    def cost_bat1(self) -> float:
        return self.points[1]

    @cached_property
    def fit(self) -> tuple[float, float]:
        return fit_alpha(self.points)

    def alpha(self, b: float) -> float:
        beta, gamma = self.fit
        return 1.0 + beta * max(b - 1.0, 0.0) ** gamma

    def cost_bat(self, b: float) -> float:
        """Eq. 1: Cost_bat(b) = alpha(b) * Cost_bat(1), seconds per batch of b."""
        return self.alpha(b) * self.cost_bat1


@dataclass(frozen=True)
class DeviceProfile:
    device: str
    models: dict[str, ModelProfile]
    source: str = ""

    def compute_profile(self, model: str | None, params: int | None) -> tuple[float, ModelProfile]:
        """(Cost_bat(1) in s, the ModelProfile whose alpha(b) applies) of a model: its own
        profile when it has one (``model`` None for a job described by its layers), else
        the profiled model nearest in parameter count (``params``, needed only then), its
        Cost_bat(1) scaled by the parameter ratio."""
        mp = self.models.get(model) if model is not None else None
        if mp is not None:
            return mp.cost_bat1, mp
        if params is None:
            raise ValueError(f"model {model!r} has no profile of its own: give its parameters")
        nearest = min(self.models.values(),
                      key=lambda mp: abs(math.log(max(params, 1) / MODELS[mp.model].params)))
        return nearest.cost_bat1 * params / MODELS[nearest.model].params, nearest

    def cost_bat(self, model: str | None, b: float, params: int | None = None) -> float:
        """Eq. 1: seconds per batch of b samples on one device of this profile."""
        if not b >= 1:
            raise ValueError(f"batch size must be >= 1, got {b}")
        cost1, mp = self.compute_profile(model, params)
        return mp.alpha(b) * cost1


@dataclass(frozen=True)
class Profile:
    devices: dict[str, DeviceProfile]
    default_device: str
    path: str = field(default="<profile>", compare=False)

    def device(self, name: str | None = None) -> DeviceProfile:
        name = name or self.default_device
        if name not in self.devices:
            raise InputError(self.path, f"no device '{name}' in this profile "
                             f"(devices: {', '.join(sorted(self.devices))})", field="device")
        return self.devices[name]


# ---- reading ---------------------------------------------------------------------------

def _parse_device(source: str, name: str, raw: Any) -> DeviceProfile:
    label = f"device '{name}'"
    if not isinstance(raw, dict):
        raise InputError(source, "must be a mapping", element=label)
    unknown = sorted(str(k) for k in raw if k not in ("device", "source", "models"))
    if unknown:
        raise InputError(source, "unknown field", element=label, field=unknown[0])
    models_raw = raw.get("models")
    if not isinstance(models_raw, dict) or not models_raw:
        raise InputError(source, "must be a non-empty mapping of model -> {points: ...}",
                         element=label, field="models")
    models: dict[str, ModelProfile] = {}
    for mname, mraw in models_raw.items():
        canon = canonical_name(mname) if isinstance(mname, str) else None
        mlabel = f"{label} model '{mname}'"
        if canon is None:
            raise InputError(source, "unknown model", element=mlabel)
        if canon in models:
            raise InputError(source, "model listed twice (aliases count)", element=mlabel)
        if not isinstance(mraw, dict) or set(map(str, mraw)) - {"points", "source"}:
            raise InputError(source, "must be a mapping with 'points' (and optional 'source')",
                             element=mlabel)
        pts = mraw.get("points")
        if not isinstance(pts, dict) or not pts:
            raise InputError(source, "must be a non-empty mapping {batch_size: seconds}",
                             element=mlabel, field="points")
        points: dict[int, float] = {}
        for b, s in pts.items():
            if isinstance(b, bool) or not isinstance(b, int) or b < 1:
                raise InputError(source, f"batch size must be an integer >= 1, got {b!r}",
                                 element=mlabel, field="points")
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not (
                    math.isfinite(s) and s > 0):
                raise InputError(source, f"seconds must be a number > 0, got {s!r} for b={b}",
                                 element=mlabel, field="points")
            points[b] = float(s)
        if 1 not in points:
            raise InputError(source, "needs a point at batch size 1 (Cost_bat(1))",
                             element=mlabel, field="points")
        src = mraw.get("source", "")
        models[canon] = ModelProfile(canon, dict(sorted(points.items())), str(src))
    return DeviceProfile(name, models, str(raw.get("source", "")))


def parse_profile(data: Any, source: str = "<profile>") -> Profile:
    if not isinstance(data, dict):
        raise InputError(source, "a profile must be a YAML mapping")
    if "devices" in data:
        unknown = sorted(str(k) for k in data if k not in ("devices", "default_device"))
        if unknown:
            raise InputError(source, "unknown top-level field", field=unknown[0])
        raw_devices = data["devices"]
        if not isinstance(raw_devices, dict) or not raw_devices:
            raise InputError(source, "must be a non-empty mapping", field="devices")
        devices = {str(n): _parse_device(source, str(n), d) for n, d in raw_devices.items()}
        default = data.get("default_device", next(iter(devices)))
        if default not in devices:
            raise InputError(source, f"'{default}' is not one of the devices",
                             field="default_device")
        return Profile(devices, default, source)
    name = data.get("device")
    if not isinstance(name, str) or not name:
        raise InputError(source, "missing or not a string (or use a 'devices:' mapping)",
                         field="device")
    return Profile({name: _parse_device(source, name, data)}, name, source)


def profile_path(name_or_path: str | Path | None = None) -> Path:
    """The file of a shipped profile's name (``h100``, ``p100``), or the path itself.
    When None: ``$SLUICE_PROFILE`` (a name or a path: set it once for your GPUs), else the
    default profile (the measured H100)."""
    if name_or_path is None:
        name_or_path = os.environ.get(PROFILE_ENV) or None
    if name_or_path is None:
        return DEFAULT_PROFILE_PATH
    return NAMED_PROFILES.get(str(name_or_path), Path(name_or_path))


def load_profile(path: str | Path | None = None) -> Profile:
    """A profile file or shipped profile name, or the default profile when ``path`` is None."""
    path = profile_path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(str(path), f"cannot read: {err.strerror or err}")
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise InputError(str(path), f"not valid YAML: {' '.join(str(err).split())}")
    return parse_profile(data, str(path))


# ---- writing ---------------------------------------------------------------------------

def save_profile(path: str | Path, device: str, points: Mapping[str, Mapping[int, float]],
                 source: str = "", model_sources: Mapping[str, str] | None = None,
                 header: str = "") -> Path:
    """Write a single-device profile that ``load_profile`` reads back.

    ``points``: model name -> {batch size: seconds per batch}; must include b = 1.
    ``header``: optional comment lines written at the top (provenance).
    The document is validated before the file is written."""
    model_sources = model_sources or {}
    doc: dict[str, Any] = {"device": device, "source": source, "models": {}}
    for model, pts in points.items():
        entry: dict[str, Any] = {"points": {int(b): float(s) for b, s in sorted(pts.items())}}
        if model in model_sources:
            entry["source"] = model_sources[model]
        doc["models"][model] = entry
    parse_profile(doc, str(path))           # refuse to write what we could not read
    path = Path(path)
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    path.write_text(comment + yaml.safe_dump(doc, sort_keys=False, width=100))
    return path
