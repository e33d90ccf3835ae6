"""Below the command lines, functions get typed options, never the argparse namespace.

The rule, checked on every function of every module of the code's packages (ps_runtime
first; every top-level package but the tests):

* A *namespace parameter* is a parameter named ``args`` that is unannotated or annotated
  ``Namespace`` (``*args`` is a tuple, and ``args: list[str]`` an argument list: neither
  is one), or a parameter of any name annotated ``Namespace`` / ``argparse.Namespace``.
* Only two kinds of function may have one:

  - an *entry point*: ``run_<suffix>`` in a module that ``sluice/cli.py``'s COMMANDS or
    ROUTES route to (the dispatcher, ``sluice.cli.main``, calls it with the parsed
    namespace);
  - a *builder*: a function of a command-line module (one that builds a parser: it calls
    ``ArgumentParser`` or ``add_argument``) whose return annotation names a frozen
    dataclass defined in ps_runtime and which calls that class itself: it turns the
    namespace into that config, once (a function that returns a record it reads from a
    file, such as a checkpoint's Manifest, builds nothing and is no builder).

* A *namespace name* inside a function is its namespace parameter or a name assigned
  from a ``parse_args(...)`` call (a worker's ``main``). Outside a builder, such a name is
  passed whole (a plain positional or keyword argument) only to a builder, or to
  ``getattr``/``vars``/``hasattr``, which read it where it is.

So ``def open_device(args)``, ``def f(ns: argparse.Namespace)`` and ``main`` calling
``finish(args, ...)`` all fail, while ``run_train(args)`` -> ``train(train_options(args))``
passes. A namespace renamed and left unannotated (``def f(ns): ns.job``) is not seen: no
rule on names can tell it from any other object; ``test_no_flags_below_cli`` and review
catch the rest.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import REPO as ROOT

PACKAGE = "ps_runtime"
DISPATCHER = "sluice.cli.main"
READS = {"getattr", "vars", "hasattr"}


def _name(node: ast.AST | None) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):   # "Namespace"
        return node.value.rsplit(".", 1)[-1]
    return ""


def _functions(tree: ast.AST):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _params(fn) -> list[ast.arg]:
    a = fn.args
    return a.posonlyargs + a.args + a.kwonlyargs


def namespace_params(fn) -> list[str]:
    return [p.arg for p in _params(fn) if _name(p.annotation) == "Namespace"
            or (p.arg == "args" and p.annotation is None)]


def builds_parser(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _name(n.func) in ("ArgumentParser", "add_argument")
               for n in ast.walk(tree))


def frozen_dataclasses(trees) -> set[str]:
    out = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(d, ast.Call) and _name(d.func) == "dataclass"
                    and any(k.arg == "frozen" and isinstance(k.value, ast.Constant)
                            and k.value.value is True for k in d.keywords)
                    for d in node.decorator_list):
                out.add(node.name)
    return out


def routed_modules(root: Path = ROOT) -> set[str]:
    """The modules sluice/cli.py's COMMANDS and ROUTES route to (read from its source)."""
    tree = ast.parse((root / "sluice" / "cli.py").read_text(encoding="utf-8"))
    found = {}
    for node in ast.walk(tree):
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if _name(target) in ("COMMANDS", "ROUTES") and isinstance(node.value, ast.Dict):
            found[_name(target)] = {v.elts[0].value for v in node.value.values}
    assert set(found) == {"COMMANDS", "ROUTES"}, f"sluice/cli.py: found only {set(found)}"
    return found["COMMANDS"] | found["ROUTES"]


def _called(fn) -> set[str]:
    return {_name(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)}


def _namespace_names(fn) -> set[str]:
    names = set(namespace_params(fn))
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _name(node.value.func) == "parse_args":
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def problems_in(modules: dict[str, str], routed: set[str]) -> list[str]:
    """``modules``: dotted name -> source. The rule of the module docstring."""
    trees = {m: ast.parse(src) for m, src in modules.items()}
    frozen = frozen_dataclasses(trees.values())
    builders = {(m, fn.name) for m, tree in trees.items() if builds_parser(tree)
                for fn in _functions(tree)
                if namespace_params(fn) and _name(fn.returns) in frozen
                and _name(fn.returns) in _called(fn)}
    builder_names = {name for _, name in builders}
    out = []
    for module, tree in trees.items():
        for fn in _functions(tree):
            where = f"{module}.{fn.name} (line {fn.lineno})"
            is_builder = (module, fn.name) in builders
            is_entry = module in routed and fn.name.startswith("run_")
            params = namespace_params(fn)
            if params and not (is_builder or is_entry):
                out.append(f"{where}: takes the namespace as {', '.join(params)!r}")
            if is_builder or where.startswith(DISPATCHER + " "):
                continue
            names = _namespace_names(fn)
            for call in ast.walk(fn):
                if not isinstance(call, ast.Call) or _name(call.func) in builder_names | READS:
                    continue
                passed = [a for a in call.args + [k.value for k in call.keywords]
                          if isinstance(a, ast.Name) and a.id in names]
                out += [f"{where}: passes the namespace {a.id!r} whole to "
                        f"{_name(call.func) or '?'}() (line {call.lineno})" for a in passed]
    return sorted(set(out))


def package_sources(root: Path = ROOT, package: str = PACKAGE) -> dict[str, str]:
    return {".".join(p.relative_to(root).with_suffix("").parts): p.read_text(encoding="utf-8")
            for p in sorted((root / package).rglob("*.py"))}


def all_sources(root: Path = ROOT) -> dict[str, str]:
    """Every top-level package with Python code but the tests (a package added later is
    covered without a change here)."""
    out: dict[str, str] = {}
    for p in sorted(root.iterdir()):
        if p.is_dir() and not p.name.startswith(".") and p.name != "tests" \
                and any(p.rglob("*.py")):
            out.update(package_sources(root, p.name))
    return out


def test_no_function_below_ps_runtimes_command_lines_takes_the_namespace():
    found = problems_in(package_sources(), routed_modules())
    assert not found, "\n".join(found)


def test_no_function_below_any_command_line_takes_the_namespace():
    sources = all_sources()
    assert {"ps_runtime", "job_scheduler", "end_to_end", "controller", "mininet_tests",
            "sluice", "bench"} <= {m.split(".")[0] for m in sources}
    found = problems_in(sources, routed_modules())
    assert not found, "\n".join(found)


def test_the_scan_sees_the_package_and_its_entry_points():
    sources = package_sources()
    assert "ps_runtime.cli" in sources and "ps_runtime.worker" in sources
    assert "ps_runtime.cli" in routed_modules()
    trees = {m: ast.parse(s) for m, s in sources.items()}
    assert {"TrainOptions", "CheckpointOptions", "WorkerCheckpoint"} <= frozen_dataclasses(
        trees.values())
    entry = [f.name for f in _functions(trees["ps_runtime.cli"]) if namespace_params(f)]
    assert {"run_train", "run_profile", "train_options"} <= set(entry), entry


def test_the_scan_sees_each_kind_of_leak():
    cli = '''
import argparse
from dataclasses import dataclass
@dataclass(frozen=True)
class Opts:
    x: int
@dataclass
class Loose:
    x: int
def configure(parser):
    parser.add_argument("--x")
def opts_of(args: argparse.Namespace) -> Opts:
    return Opts(**vars(args))
def loose_of(args) -> Loose:
    return Loose(args.x)
def run_thing(args):
    helper(args)
    return go(opts_of(args))
def helper(ns: argparse.Namespace):
    return ns.x
def varargs(*args):
    return len(args)
def manifest_of(args) -> Opts:
    return read_opts(args.dir)
def argv_of(args: list[str]):
    return helper2(args)
'''
    worker = '''
import argparse
def open_device(args):
    return args.device
def main(argv=None):
    args = argparse.ArgumentParser().parse_args(argv)
    seed = getattr(args, "seed", 0) + len(vars(args))
    return finish(args, seed) + finish(options=args)
'''
    found = problems_in({"pkg.cli": cli, "pkg.worker": worker}, routed={"pkg.cli"})
    assert found == sorted([
        "pkg.cli.helper (line 19): takes the namespace as 'ns'",
        "pkg.cli.loose_of (line 14): takes the namespace as 'args'",
        "pkg.cli.manifest_of (line 23): takes the namespace as 'args'",
        "pkg.cli.run_thing (line 16): passes the namespace 'args' whole to helper() (line 17)",
        "pkg.worker.main (line 5): passes the namespace 'args' whole to finish() (line 8)",
        "pkg.worker.open_device (line 3): takes the namespace as 'args'",
    ]), found
    # the same builder in a module that builds no parser is no builder
    found = problems_in({"pkg.cli": cli.replace('parser.add_argument("--x")', "pass")},
                        routed={"pkg.cli"})
    assert "pkg.cli.opts_of (line 12): takes the namespace as 'args'" in found, found
