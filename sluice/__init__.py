"""sluice: application-aware scheduling of parameter-server training jobs.

The command-line entry point lives in :mod:`sluice.cli`; the components are the
top-level packages (bottom to top, see docs/design.md) ``sluice_common``, ``topologies``,
``controller``, ``ps_runtime``, ``mininet_fabric``, ``job_scheduler``, ``end_to_end`` and
``mininet_tests``.
"""

from __future__ import annotations

from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def package_version(pyproject: Path = PYPROJECT) -> str:
    """The installed distribution's version; from a checkout that is not installed (run
    with PYTHONPATH), the version its pyproject.toml declares."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sluice")
    except PackageNotFoundError:
        import tomllib

        try:
            return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


__version__ = package_version()
