"""Measure ``Cost_bat(b)`` on the real device and fit ``alpha(b)`` (Proteus eq. 1).

``measure_step`` times one training iteration (forward + backward + SGD step, as the
workers run it) of a model on a batch of b synthetic samples: ``warmup`` untimed
iterations, then the median (or, on a shared machine, the minimum) of ``repeats``
timed ones. ``profile_models`` does it for
every (model, b); the fit and the file format are the scheduler's own
(``sluice_common.profile.fit_alpha`` / ``save_profile``), so what is written here is
exactly what the estimator reads back. ``fit_table`` gives the paper's Fig. 1 view:
fitted vs measured time per batch size with the relative error.
"""

from __future__ import annotations

import platform
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import torch
from torch import nn

from sluice_common.profile import ModelProfile
from ps_runtime.data import SyntheticImages
from ps_runtime.models import build_model, input_shape


def device_label(device: torch.device) -> str:
    """A file-name-safe device name: ``cpu-amd-epyc``, ``cuda-nvidia-h100-80gb-hbm3``."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = _cpu_model()
    return f"{device.type}-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_step(model_name: str, batch_size: int, device: torch.device, input_size: int = 64,
                 warmup: int = 2, repeats: int = 5, model: nn.Module | None = None,
                 statistic: str = "median") -> float:
    """Median (or minimum) seconds of one training iteration on a batch of ``batch_size``.
    The minimum suits a shared machine: neighbours only ever add time."""
    model = model or build_model(model_name, input_size=input_size).to(device)
    model.train()
    shape = input_shape(model_name, input_size)
    with torch.no_grad():
        classes = model(torch.zeros(2, *shape, device=device)).shape[1]
    x, y = SyntheticImages(classes, shape).batch(batch_size, 0)
    x, y = x.to(device), y.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for i in range(warmup + repeats):
        _sync(device)
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        _sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return min(times) if statistic == "min" else statistics.median(times)


def profile_models(models: list[str], batch_sizes: list[int], device: torch.device,
                   input_size: int = 64, warmup: int = 2, repeats: int = 5,
                   progress: Callable[[str], None] | None = None,
                   statistic: str = "median") -> dict[str, dict[int, float]]:
    """model -> {b: seconds per batch}. One model instance per model (weights do not
    change the time)."""
    out: dict[str, dict[int, float]] = {}
    for name in models:
        model = build_model(name, input_size=input_size).to(device)
        out[name] = {}
        for b in batch_sizes:
            t0 = time.monotonic()
            out[name][b] = measure_step(name, b, device, input_size, warmup, repeats, model,
                                        statistic)
            if progress:
                progress(f"{name} b={b}: {out[name][b] * 1000:.1f} ms/batch "
                         f"(measured in {time.monotonic() - t0:.1f} s)")
        del model
    return out


@dataclass(frozen=True)
class FitRow:
    batch_size: int
    measured_s: float
    fitted_s: float

    @property
    def rel_error(self) -> float:
        return (self.fitted_s - self.measured_s) / self.measured_s


def fit_table(model: str, points: Mapping[int, float]) -> tuple[ModelProfile, list[FitRow]]:
    """The scheduler's fit of alpha(b) to ``points`` and, per b, fitted vs measured."""
    prof = ModelProfile(model, dict(sorted(points.items())))
    return prof, [FitRow(b, s, prof.cost_bat(b)) for b, s in sorted(points.items())]


def max_fit_error(points: Mapping[int, float]) -> float:
    """Largest |fitted - measured| / measured over the points (0 for a single point)."""
    return max(abs(r.rel_error) for r in fit_table("fit", points)[1])


def format_fit(model: str, points: Mapping[int, float]) -> str:
    prof, rows = fit_table(model, points)
    beta, gamma = prof.fit
    lines = [f"{model}: Cost_bat(1) = {prof.cost_bat1 * 1000:.2f} ms, "
             f"alpha(b) = 1 + {beta:.4g} * (b-1)^{gamma:.3f}",
             f"  {'b':>5} {'measured ms':>12} {'fitted ms':>10} {'rel err':>8}"]
    lines += [f"  {r.batch_size:>5} {r.measured_s * 1000:>12.2f} {r.fitted_s * 1000:>10.2f} "
              f"{r.rel_error * 100:>7.1f}%" for r in rows]
    return "\n".join(lines)


def plot_fit(results: Mapping[str, Mapping[int, float]], path: str | Path, title: str) -> Path:
    """Measured points and fitted curve of Cost_bat(b) per model (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (model, points) in enumerate(results.items()):
        prof, rows = fit_table(model, points)
        colour = f"C{i}"
        bs = [r.batch_size for r in rows]
        ax.plot(bs, [r.measured_s * 1000 for r in rows], "o", color=colour,
                label=f"{model} measured")
        grid = np.geomspace(1, max(bs), 100)
        ax.plot(grid, [prof.cost_bat(b) * 1000 for b in grid], "-", color=colour,
                label=f"{model} fit (max err {max(abs(r.rel_error) for r in rows) * 100:.0f}%)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size b")
    ax.set_ylabel("Cost_bat(b), ms per batch")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def log(text: str) -> None:
    print(f"profile: {text}", file=sys.stderr, flush=True)
