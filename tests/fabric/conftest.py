"""Everything under tests/fabric/ needs the fabric (root, Open vSwitch, Mininet; Slurm for
tests/fabric/slurm/): its place marks it ``fabric``, so ``-m "not fabric"`` and
``pytest tests/unit`` leave it out, and the root conftest gives it the ``fabric_env``
fixture that fails loudly where the fabric cannot be had."""

from __future__ import annotations

from pathlib import Path

import pytest

FABRIC_TREE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)      # before -m deselects and before fabric_env is added
def pytest_collection_modifyitems(items):
    for item in items:
        if FABRIC_TREE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.fabric)
