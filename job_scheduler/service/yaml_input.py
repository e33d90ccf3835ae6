"""A service input file read as YAML: what cannot be read, or is not YAML, is the
file's InputError (exit 2, the file named), before anything starts."""

from __future__ import annotations

from pathlib import Path

from sluice_common.errors import InputError


def read_yaml(path: str | Path):
    """The parsed YAML of ``path``; InputError naming the file when it cannot be read or
    parsed."""
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise InputError(str(path), f"cannot read: {err.strerror or err}")
    except yaml.YAMLError as err:
        raise InputError(str(path), f"not YAML: {err}")
