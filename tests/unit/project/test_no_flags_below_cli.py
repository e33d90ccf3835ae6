"""Options are typed below the command lines: each command turns its namespace
into a frozen config once; nothing below a cli.py / *_cli.py module imports argparse,
adds arguments to a parser, reads an ``args`` namespace, or names a flag in an error or
a default (the CLI that owns the parser turns a field into its flag). A process entry
point (a worker's ``python -m`` module) is a command line of its own: the allow-list
names each one and why. Command lines built for other programs (sbatch, srun, ovs,
``python -m`` workers) are data, not errors, and are not looked at. An experiment script
(mininet_tests: a module run as ``python -m``) is a command line too: only the function
that parses its options may read the namespace."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from support.paths import REPO as ROOT


def all_packages(root: Path) -> tuple[str, ...]:
    """Every top-level directory that holds Python code, but the tests (a package added
    later is covered without a change here)."""
    return tuple(sorted(p.name for p in root.iterdir()
                        if p.is_dir() and not p.name.startswith(".") and p.name != "tests"
                        and any(p.rglob("*.py"))))


PACKAGES = all_packages(ROOT)
# process entry points with a parser of their own, and the helpers that take their namespace
ENTRY_POINTS = {
    "ps_runtime/worker.py": "python -m ps_runtime.worker",
    "ps_runtime/emulated_worker.py": "python -m ps_runtime.emulated_worker",
    "ps_runtime/slurm_job.py": "python -m ps_runtime.slurm_job",
    "ps_runtime/auto_worker.py": "python -m ps_runtime.auto_worker (compute decided per worker)",
    "ps_runtime/train_checkpoint.py": "the checkpoint flags of sluice train (ps_runtime/cli.py) "
                                      "and of the workers, and their namespaces as configs",
    "bench/harness.py": "the flags every benchmark's command line shares (--json, --quick)",
}
FLAG = re.compile(r"(^|[\s(/'\"`])--[a-zA-Z]")
# another program's flags in an error about that program are fine ("sbatch --parsable printed")
FOREIGN = re.compile(r"\b(sinfo|sbatch|squeue|scontrol|scancel|srun|sacct|curl|ovs-\w+|pip|iperf3)\b"
                     r".*--[a-zA-Z]")
ERROR_CALLS = {"InputError", "option_error", "ValueError", "SystemExit", "TypeError"}


def is_cli(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name == "cli.py" or name.endswith("_cli.py") or rel in ENTRY_POINTS


def _strings(node: ast.AST):
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _flags(node: ast.AST) -> list[str]:
    return [s for s in _strings(node) if FLAG.search(s) and not FOREIGN.search(s)]


def problems_in(rel: str, source: str) -> list[str]:
    out: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            out.append(f"{where}: imports argparse")
        elif isinstance(node, ast.ImportFrom) and node.module == "argparse":
            out.append(f"{where}: imports argparse")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "args":
            out.append(f"{where}: reads args.{node.attr}")
        elif isinstance(node, ast.Call) and _callee(node) in ("add_argument", "ArgumentParser"):
            out.append(f"{where}: builds a parser")
        elif isinstance(node, ast.Call) and _callee(node) in ("getattr", "vars") and node.args \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == "args":
            name = node.args[1].value if len(node.args) > 1 and isinstance(
                node.args[1], ast.Constant) else "*"
            out.append(f"{where}: reads args.{name}")
        elif isinstance(node, (ast.Raise, ast.Call)) and (
                isinstance(node, ast.Raise) or _callee(node) in ERROR_CALLS):
            out += [f"{where}: names a flag in an error: {s!r}" for s in _flags(node)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defaults = node.args.defaults + [d for d in node.args.kw_defaults if d]
            out += [f"{where}: names a flag in a default: {s!r}" for d in defaults
                    for s in _flags(d)]
    return list(dict.fromkeys(out))        # a raised error call is seen twice


# packages of experiment scripts: each module run as ``python -m`` is a command line of its
# own; below it (the functions that do not build its parser) the same rules hold
SCRIPT_PACKAGES = ("mininet_tests", "bench")


def is_script(source: str) -> bool:
    return '__name__ == "__main__"' in source


def script_problems(rel: str, source: str) -> list[str]:
    """An experiment script: only the function that parses its command line may read the
    namespace; every other function is below the command line."""
    out = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if any(isinstance(n, ast.Call) and _callee(n) in ("parse_args", "parse_known_args")
               for n in ast.walk(fn)):
            continue
        found = problems_in(rel, "\n" * (fn.lineno - 1) + ast.unparse(fn))
        out += [p for p in found if "reads args." in p]
    return out


def problems(root: Path = ROOT) -> list[str]:
    out = []
    for package in all_packages(root):
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            source = path.read_text(encoding="utf-8")
            if package in SCRIPT_PACKAGES and is_script(source):
                out += script_problems(rel, source)
            elif not is_cli(rel):
                out += problems_in(rel, source)
    return sorted(set(out))


def test_nothing_below_the_command_lines_names_a_flag_or_reads_a_namespace():
    found = problems()
    assert not found, "\n".join(found)


def test_the_scan_covers_every_package():
    assert {"bench", "sluice", "mininet_tests", "job_scheduler", "end_to_end", "controller",
            "sluice_common", "topologies", "mininet_fabric", "slurm_client",
            "ps_runtime"} <= set(PACKAGES), PACKAGES
    assert "tests" not in PACKAGES and set(SCRIPT_PACKAGES) <= set(PACKAGES)


def test_the_scan_sees_each_kind_of_leak():
    leaky = '''
import argparse
def f(args, text, source="--controller"):
    rate = getattr(args, "rate", 1.0)
    if args.slot < 0:
        raise InputError("--slot", "must be > 0")
    return InputError(f"argument {text}", f"needs --pack, got {text}")
def g(parser):
    parser.add_argument("--x")
def ok():
    return ["sbatch", "--parsable"]        # a command line for another program
'''
    found = problems_in("x.py", leaky)
    kinds = {p.split(": ", 2)[1].split(" ")[0] + " " + p.split(": ", 2)[1].split(" ")[1]
             for p in found}
    assert {"imports argparse", "reads args.slot", "reads args.rate", "names a",
            "builds a"} <= kinds, found
    assert sum("names a flag in an error" in p for p in found) == 2, found
    assert sum("names a flag in a default" in p for p in found) == 1, found
    assert not any("--parsable" in p for p in found)
    assert is_cli("job_scheduler/simulation/cli.py") and is_cli("job_scheduler/service/cli.py")
    assert not is_cli("job_scheduler/service/app.py")


def test_an_experiment_script_may_read_its_namespace_only_where_it_parses_it():
    script = '''
import argparse
def helper(args):
    return args.seconds
def main(argv=None):
    args = argparse.ArgumentParser().parse_args(argv)
    return helper(args) + args.rate
if __name__ == "__main__":
    main()
'''
    assert is_script(script)
    found = script_problems("mininet_tests/x.py", script)
    assert found == ["mininet_tests/x.py:4: reads args.seconds"], found
