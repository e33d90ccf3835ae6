"""The test tree mirrors the code, and its place says what a test needs.

- ``tests/unit/<package>/.../test_<module>[_<aspect>].py``: the folders are a package of the
  code (``tests/unit/job_scheduler/core/`` is ``job_scheduler.core``) and the name starts
  with one of its modules or subpackages (``test_store.py``, ``test_slurm_executor_site.py``).
  Two documented exceptions: ``tests/unit/project/`` holds the tests of the project as a
  whole (layering, docs, examples, both services as processes, the systemd units, this
  file), and ``tests/unit/ranking/`` holds every ranking test in one place, each named after
  a module of the packages that rank (``sluice_common``, ``controller``).
- ``tests/fabric/<area>/test_*.py``: tests that need root, Open vSwitch, Mininet or Slurm
  (``tests/fabric/conftest.py`` marks the whole tree ``fabric``).
- ``tests/support/``: the helpers tests share (no test imports another test file);
  ``tests/data/``: recorded inputs. Nothing else directly in ``tests/``.
- Nothing under ``tests/unit/`` asks for the fabric: no ``fabric`` marker, no fabric fixture.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.paths import REPO

TESTS = REPO / "tests"
UNIT = TESTS / "unit"
FABRIC = TESTS / "fabric"
# folder under tests/unit/ -> the packages whose modules its files may be named after
CROSS_CUTTING = {"project": None, "ranking": ("sluice_common", "controller")}
ALLOWED_AT_TOP = {"__init__.py", "conftest.py", "unit", "fabric", "support", "data",
                  "__pycache__"}
FABRIC_FIXTURES = {"fabric_env", "normal_controller", "slurm_fabric"}


def modules_of(package: Path) -> set[str]:
    """The modules and subpackages of a code package (a folder of .py files)."""
    return ({p.stem for p in package.glob("*.py") if p.stem != "__init__"}
            | {d.name for d in package.iterdir() if (d / "__init__.py").exists()})


def names_its_module(test: Path, modules: set[str]) -> bool:
    """``test_<module>.py`` or ``test_<module>_<aspect>.py`` for one of ``modules``."""
    stem = test.stem.removeprefix("test_")
    return any(stem == m or stem.startswith(m + "_") for m in modules)


def layout_problems(tests: Path, repo: Path) -> list[str]:
    """Every file or folder out of place under ``tests``, as 'path: why'."""
    problems = [f"tests/{p.name}: only unit/, fabric/, support/, data/ and conftest.py "
                f"belong directly in tests/" for p in sorted(tests.iterdir())
                if p.name not in ALLOWED_AT_TOP]
    unit = tests / "unit"
    for test in sorted(unit.rglob("test_*.py")):
        rel = test.relative_to(unit)
        where = rel.parent.parts
        if not where:
            problems.append(f"tests/unit/{rel}: a unit test goes in the folder of its package")
            continue
        if where[0] in CROSS_CUTTING:
            allowed = CROSS_CUTTING[where[0]]
            if allowed and not names_its_module(
                    test, set().union(*(modules_of(repo / p) for p in allowed))):
                problems.append(f"tests/unit/{rel}: names no module of {', '.join(allowed)}")
            continue
        package = repo.joinpath(*where)
        if not package.is_dir() or not any(package.glob("*.py")):
            problems.append(f"tests/unit/{rel}: {'/'.join(where)} is no package of the code")
        elif not names_its_module(test, modules_of(package)):
            problems.append(f"tests/unit/{rel}: names no module of {'.'.join(where)} "
                            f"(test_<module>[_<aspect>].py)")
    for test in sorted((tests / "fabric").rglob("test_*.py")):
        if test.parent == tests / "fabric":
            problems.append(f"tests/fabric/{test.name}: a fabric test goes in an area folder")
    return problems


def fabric_uses(source: str) -> list[str]:
    """The fabric marker or fabric fixtures a test module asks for."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "fabric" and \
                isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
            found.append(f"line {node.lineno}: the fabric marker")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in node.args.args:
                if arg.arg in FABRIC_FIXTURES:
                    found.append(f"line {node.lineno}: the {arg.arg} fixture")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("usefixtures", "getfixturevalue"):
            found += [f"line {node.lineno}: the {a.value} fixture (by name)" for a in node.args
                      if isinstance(a, ast.Constant) and a.value in FABRIC_FIXTURES]
    return found


def imported_test_modules(source: str) -> list[str]:
    """Test files a module imports (shared helpers belong in tests/support/)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found += [n for n in names if n.split(".")[-1].startswith("test_")
                  or n.startswith(("tests.unit", "tests.fabric"))]
    return found


def fabric_fixtures_defined() -> list[str]:
    tree = ast.parse((TESTS / "conftest.py").read_text())
    return [f.name for f in tree.body if isinstance(f, ast.FunctionDef)]


def test_every_test_file_is_where_the_layout_says():
    assert layout_problems(TESTS, REPO) == []


def test_no_unit_test_asks_for_the_fabric():
    assert FABRIC_FIXTURES <= set(fabric_fixtures_defined())
    found = {str(p.relative_to(TESTS)): fabric_uses(p.read_text())
             for p in UNIT.rglob("*.py")}
    assert {k: v for k, v in found.items() if v} == {}


def test_no_test_file_imports_another():
    found = {str(p.relative_to(TESTS)): imported_test_modules(p.read_text())
             for p in TESTS.rglob("*.py")}
    assert {k: v for k, v in found.items() if v} == {}


# ---- the checks catch what they are for -----------------------------------------------------

@pytest.fixture
def tree(tmp_path):
    """A repository with a package ``pkg`` (modules ``store``, ``slurm_executor``, subpackage
    ``core``) and an empty test tree."""
    (tmp_path / "pkg" / "core").mkdir(parents=True)
    for f in ("pkg/__init__.py", "pkg/store.py", "pkg/slurm_executor.py", "pkg/core/__init__.py",
              "pkg/core/proteus.py"):
        (tmp_path / f).write_text("")
    for d in ("tests/unit/pkg/core", "tests/fabric/area", "tests/support", "tests/data"):
        (tmp_path / d).mkdir(parents=True)
    return tmp_path


@pytest.mark.parametrize("path,words", [
    ("tests/test_flat.py", "belong directly in tests/"),
    ("tests/unit/test_loose.py", "folder of its package"),
    ("tests/unit/nopkg/test_store.py", "nopkg is no package"),
    ("tests/unit/pkg/test_stores.py", "names no module of pkg"),
    ("tests/unit/pkg/core/test_store.py", "names no module of pkg.core"),
    ("tests/fabric/test_loose.py", "an area folder"),
])
def test_a_misplaced_file_is_named_with_the_reason(tree, path, words):
    (tree / path).parent.mkdir(parents=True, exist_ok=True)
    (tree / path).write_text("")
    problems = layout_problems(tree / "tests", tree)
    assert len(problems) == 1 and problems[0].startswith(path + ":"), problems
    assert words in problems[0], problems


def test_well_placed_files_pass(tree):
    for path in ("tests/unit/pkg/test_store.py", "tests/unit/pkg/test_slurm_executor_site.py",
                 "tests/unit/pkg/test_core.py", "tests/unit/pkg/core/test_proteus.py",
                 "tests/unit/project/test_anything.py", "tests/fabric/area/test_anything.py",
                 "tests/conftest.py", "tests/support/helpers.py"):
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text("")
    assert layout_problems(tree / "tests", tree) == []


def test_the_fabric_marker_fixtures_and_test_imports_are_found():
    source = ("import pytest\nfrom test_other import helper\nimport tests.fabric.x.test_y\n"
              "@pytest.mark.fabric\ndef test_a(slurm_fabric): pass\n"
              "@pytest.mark.usefixtures('normal_controller')\ndef test_b(): pass\n"
              "def test_c(tmp_path): pass\n")
    assert sorted(fabric_uses(source)) == ["line 4: the fabric marker",
                                           "line 5: the slurm_fabric fixture",
                                           "line 6: the normal_controller fixture (by name)"]
    assert sorted(imported_test_modules(source)) == ["test_other", "tests.fabric.x.test_y"]
    assert fabric_uses("def test_c(tmp_path): pass\n") == []


def test_test_files_find_the_repository_through_support_paths():
    """A test file that computes the repository from its own place (``__file__``) breaks
    when it moves: test_fabric.py's pointed at tests/fabric, and a subprocess started
    there imported the test folder ``mininet_fabric`` instead of the package."""
    found = [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
             if any(isinstance(n, ast.Name) and n.id == "__file__"
                    for n in ast.walk(ast.parse(p.read_text())))]
    assert not found, f"use support.paths (REPO, TEST_DATA) in: {found}"
