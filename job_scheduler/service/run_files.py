"""What a Slurm job's batch script leaves in its run directory, read leniently (a file
not there, or not written yet, is None / the default)."""

from __future__ import annotations

import json
from pathlib import Path

from ps_runtime.slurm_plan import ERROR_FILE, EXIT_FILE


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_exit(run_dir: Path) -> int | None:
    try:
        return int((run_dir / EXIT_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def mtime(path: Path, default: float) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return default


def error_text(run_dir: Path, code: int | None) -> str:
    try:
        text = (run_dir / ERROR_FILE).read_text().strip()
    except OSError:
        text = ""
    return text or f"batch script exited with status {code}"
