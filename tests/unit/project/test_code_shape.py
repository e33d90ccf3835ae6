"""The code's shape: modules are sized by their concept, not by a line count, and what
keeps them sound is ownership, so no module reaches into another's private names (the
layer contracts in pyproject.toml, checked by lint-imports, say which package may import
which). Here: the benchmarks import no private name of the package they measure, and the
walk that finds the sources sees every package."""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import REPO as ROOT
SKIP_DIRS = {"tests", "build", "dist", "node_modules", "__pycache__"}


def sources(root: Path = ROOT) -> list[Path]:
    """Every .py file outside tests/, the virtual environment and hidden directories."""
    out = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts[:-1]
        if any(p in SKIP_DIRS or p.startswith(".") or p.endswith(".egg-info") for p in parts):
            continue
        out.append(path)
    return out


def private_imports(source: str) -> list[str]:
    """``from module import _name``: a module reaching into another's private names
    (``from __future__`` and dunder names aside)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            out += [f"{node.module}.{a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_bench_imports_no_private_name():
    found = {str(p.relative_to(ROOT)): private_imports(p.read_text())
             for p in sources() if p.relative_to(ROOT).parts[0] == "bench"}
    assert not {k: v for k, v in found.items() if v}, found


def test_the_private_import_check_sees_one():
    assert private_imports("from a.b import c, _d\nfrom __future__ import annotations\n"
                           "from e import __version__\n") == ["a.b._d"]


def test_the_walk_sees_every_package_and_nothing_of_the_venv_or_tests(tmp_path):
    packages = {p.relative_to(ROOT).parts[0] for p in sources()}
    # a renamed or moved tree would otherwise drop out of every check built on the walk
    assert {"bench", "sluice", "end_to_end", "job_scheduler", "controller", "mininet_tests",
            "mininet_fabric", "ps_runtime", "slurm_client", "sluice_common",
            "topologies"} <= packages, packages
    src = tmp_path / "one.py"
    src.write_text("x = 1\n")
    for hidden in (".venv", "tests"):
        (tmp_path / hidden).mkdir()
        (tmp_path / hidden / "big.py").write_text("x = 1\n")
    assert sources(tmp_path) == [src]
