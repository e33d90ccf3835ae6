"""The code's shape (the developer guide): outside ``tests/`` no ``.py`` file
over 500 lines and no function (or method, or nested function) over 80 lines. The test
walks every package of the repository and lists every offender with its size."""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import REPO as ROOT
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
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


def offenders(path: Path, rel: str) -> list[str]:
    text = path.read_text(encoding="utf-8")
    out = []
    lines = len(text.splitlines())
    if lines > MAX_FILE_LINES:
        out.append(f"{rel}: {lines} lines (> {MAX_FILE_LINES})")
    for node in ast.walk(ast.parse(text, filename=rel)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            size = node.end_lineno - node.lineno + 1
            if size > MAX_FUNCTION_LINES:
                out.append(f"{rel}:{node.lineno}: {node.name}() {size} lines "
                           f"(> {MAX_FUNCTION_LINES})")
    return out


def test_no_file_over_500_lines_and_no_function_over_80_outside_tests():
    files = sources()
    packages = {p.relative_to(ROOT).parts[0] for p in files}
    # the walk sees every package (a renamed or moved tree would otherwise drop out)
    assert {"bench", "sluice", "end_to_end", "job_scheduler", "controller", "mininet_tests",
            "mininet_fabric", "ps_runtime", "slurm_client", "sluice_common",
            "topologies"} <= packages, packages
    assert not any(p.relative_to(ROOT).parts[0] in (".venv", "tests") for p in files)
    found = [o for p in files for o in offenders(p, p.relative_to(ROOT).as_posix())]
    assert not found, "split by concern:\n" + "\n".join(found)


def test_the_shape_check_sees_a_long_file_and_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    src = tmp_path / "long.py"
    src.write_text("def long_one():\n" + body + "\n" + "\n" * 420
                   + "class C:\n    def short(self):\n        return 1\n")
    found = offenders(src, "long.py")
    assert any(o.startswith("long.py: ") and "lines (> 500)" in o for o in found), found
    assert any("long_one() 86 lines" in o for o in found), found
    assert not any("short()" in o for o in found)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "big.py").write_text("x = 1\n" * 600)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "big.py").write_text("x = 1\n" * 600)
    assert sources(tmp_path) == [src]


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
