"""Every name is imported from the module that defines it: a module is no second address
for another module's names (a package's ``__init__.py`` is the one place that gathers
names for its importers). So a reader who follows an import lands on the definition,
and moving a name breaks its importers loudly instead of leaving an alias behind."""

from __future__ import annotations

import ast
import functools
import subprocess
from pathlib import Path

from support.paths import REPO


@functools.cache
def module_file(module: str, repo: Path) -> Path | None:
    """The file of a project module (the tests' shared code is imported from tests/)."""
    for base in (repo, repo / "tests"):
        path = base.joinpath(*module.split("."))
        if path.with_suffix(".py").is_file():
            return path.with_suffix(".py")
        if (path / "__init__.py").is_file():
            return path / "__init__.py"
    return None


@functools.cache
def bound_names(path: Path) -> tuple[set[str], set[str]]:
    """The names a module defines itself, and those it imports."""
    defined, imported = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {a.asname or a.name.split(".")[0] for a in node.names}
    return defined, imported


def borrowed_imports(path: Path, repo: Path) -> list[str]:
    """``from M import N`` in ``path`` where M (a module, not a package) only imports N."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        home = module_file(node.module, repo)
        if home is None or home.name == "__init__.py":
            continue
        defined, imported = bound_names(home)
        out += [f"{path.relative_to(repo)}:{node.lineno}: {a.name} from {node.module}"
                for a in node.names
                if a.name in imported and a.name not in defined
                and module_file(f"{node.module}.{a.name}", repo) is None]
    return out


def tracked_python(repo: Path) -> list[Path]:
    names = subprocess.run(["git", "ls-files", "*.py"], cwd=repo, capture_output=True,
                           text=True, check=True).stdout.split()
    return [repo / n for n in names if (repo / n).is_file()]


def test_every_name_is_imported_from_its_home():
    found = [b for p in tracked_python(REPO) for b in borrowed_imports(p, REPO)]
    assert found == []


def test_no_import_is_kept_for_other_importers_outside_a_package_init():
    # an import kept only for others to import it from here is a second address (the
    # marker is split so that this line does not carry it)
    marker = "noqa: " + "F401"
    kept = [f"{p.relative_to(REPO)}:{k}" for p in tracked_python(REPO)
            if p.name != "__init__.py"
            for k, line in enumerate(p.read_text().splitlines(), 1) if marker in line]
    assert kept == []


def test_the_check_sees_a_borrowed_name(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg.home import thing\n")
    (tmp_path / "pkg" / "home.py").write_text("def thing():\n    pass\n")
    (tmp_path / "pkg" / "alias.py").write_text("from pkg.home import thing\n")
    user = tmp_path / "user.py"
    user.write_text("from pkg.alias import thing\nfrom pkg.home import thing as t\n"
                    "from pkg import thing as u\nfrom pkg import home\n")
    assert borrowed_imports(user, tmp_path) == ["user.py:1: thing from pkg.alias"]
