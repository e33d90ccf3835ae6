"""Which compute a run's workers do, and how it is said at start and in reports.

- ``torch``: real compute (``ps_runtime.worker``), on CUDA when present, else the CPU;
- ``emulated``: ``ps_runtime.emulated_worker`` waits ``Cost_bat(b)`` from a device profile
  and moves the model's bytes scaled by the fabric's ``emulation.bw_scale``.

Default: ``torch`` when a CUDA device is present, else ``emulated`` (a CPU worker would
measure the shared CPU, not the scheduler or the network). The CUDA check looks for the
NVIDIA driver first, so that a machine without one never pays for importing torch.
"""

from __future__ import annotations

import os
from pathlib import Path

from sluice_common.errors import option_error

COMPUTE_MODES = ("torch", "emulated")


def cuda_present() -> bool:
    if not (Path("/proc/driver/nvidia/gpus").is_dir() or Path("/dev/nvidia0").exists()):
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_compute(choice: str | None) -> str:
    """``None``/``auto`` -> the default for this machine; otherwise checked."""
    if choice in (None, "auto"):
        return "torch" if cuda_present() else "emulated"
    if choice not in COMPUTE_MODES:
        raise option_error("compute", f"must be one of auto, {', '.join(COMPUTE_MODES)}, "
                           f"got {choice!r}")
    return choice


def torch_device_name(device: str = "auto") -> str:
    import torch

    if device in ("auto", "cuda") and torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return f"cpu ({os.cpu_count()} cores, shared by every worker)"


def describe(compute: str, profile: str | None, device: str = "auto") -> dict:
    """{compute, device, profile}: printed at start and recorded in report.json. The
    profile is what the estimator (and the emulated workers) take Cost_bat from."""
    from sluice_common.profile import load_profile, profile_path

    path = profile_path(profile)
    prof = load_profile(path)              # InputError naming the file if it is bad
    dev = prof.device()
    if compute == "emulated":
        where = f"emulated {dev.device} (no torch; Cost_bat(b) from the profile)"
    else:
        where = torch_device_name(device)
    return {"compute": compute, "device": where, "profile": str(path),
            "profile_device": dev.device}
