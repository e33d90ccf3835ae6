"""One change, one place: outside tests/, no module but an axis's registry
compares a value with, or lists in a tuple, list or set, the names of its members
(``off-fair`` a network baseline, ``remaining`` a priority rule, ``slurm`` an executor):
every other user derives its list, choices and behaviour from the registry."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from support.paths import REPO as ROOT
NAMES = {"off-fair", "remaining", "slurm"}
REGISTRIES = {"mininet_fabric/baselines.py", "sluice_common/rank_rules.py",
              "job_scheduler/service/executor_registry.py"}
SKIP_DIRS = {"tests"}


def sources() -> list[Path]:
    """Every .py file of the repository outside tests/ (hidden folders, the venv and
    build outputs left out without walking them)."""
    out = []
    for folder, dirs, files in os.walk(ROOT):
        top = Path(folder) == ROOT
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.endswith(".egg-info")
                   and d != "__pycache__" and not (top and d in SKIP_DIRS)]
        out += [Path(folder) / f for f in files if f.endswith(".py")]
    return sorted(out)


def _named(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and node.value in NAMES else None


def offences(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, name, how) for each comparison with, or tuple/list/set listing, a name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if _named(operand):
                    found.append((node.lineno, _named(operand), "compared"))
                if isinstance(operand, (ast.Tuple, ast.List, ast.Set)):
                    found += [(node.lineno, _named(e), "compared (in)")
                              for e in operand.elts if _named(e)]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            found += [(node.lineno, _named(e), "listed") for e in node.elts if _named(e)]
        elif isinstance(node, ast.MatchValue) and _named(node.value):
            found.append((node.lineno, _named(node.value), "matched"))
    return sorted(set(found))


def test_the_checker_sees_each_way_of_typing_a_name_out():
    code = ('if mode == "off-fair": pass\n'
            'x = rule in ("progress", "remaining")\n'
            'argv = ["--executor", "slurm"]\n'
            'ok = {"slurm": 1}; f("remaining"); kind = "slurm"\n')
    assert [(line, name) for line, name, _ in offences(ast.parse(code))] == [
        (1, "off-fair"), (2, "remaining"), (2, "remaining"), (3, "slurm")]


def test_no_module_but_the_registries_types_out_an_axis_name():
    files = sources()
    assert len(files) > 150 and ROOT / "controller" / "cli.py" in files
    found = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel in REGISTRIES:
            continue
        for line, name, how in offences(ast.parse(path.read_text(), str(path))):
            found.append(f"{rel}:{line}: {name!r} {how}")
    assert not found, "type the name only in its registry:\n" + "\n".join(found)
