"""Every `sluice` help text tells the truth: each option states its default, the
workload names come from the registry, the Slurm forms are listed, the demo's line
matches its arms and draw, and --version answers."""

from __future__ import annotations

import argparse
import re

import pytest

from sluice.cli import COMMANDS, ROUTES, build_parser, main


def _forms():
    """Every (command, arguments) whose parser `sluice` builds: the commands and the
    forms ROUTES sends elsewhere."""
    out = [(name, []) for name in COMMANDS]
    for command, arg in ROUTES:
        out.append((command, [arg] if not arg.startswith("-") else [arg, "X"]))
    return out


def _all_parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_parsers(sub)


def _owes_default(action) -> bool:
    if action.default is None or action.default is argparse.SUPPRESS:
        return False
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                           argparse._StoreConstAction, argparse._HelpAction,
                           argparse._VersionAction, argparse._CountAction)):
        return False
    return bool(action.option_strings) or action.nargs in ("?", "*")


def _spellings(value) -> set[str]:
    out = {str(value)}
    if isinstance(value, float):
        out.add(f"{value:g}")
    if isinstance(value, (list, tuple)):
        out.add(",".join(map(str, value)))
    return out


@pytest.mark.parametrize("name,rest", _forms(), ids=lambda v: v if isinstance(v, str) else
                         " ".join(v) or "-")
def test_every_option_shows_its_default(name, rest):
    parser = build_parser(name, rest)[0]
    checked = 0
    for one in _all_parsers(parser):
        text = one.format_help()                     # every help text renders
        formatter = one._get_formatter()
        for action in one._actions:
            if not _owes_default(action):
                continue
            shown = formatter._expand_help(action) if action.help else ""
            label = f"{one.prog} {'/'.join(action.option_strings) or action.dest}"
            assert shown.strip(), f"{label}: no help, so no default shown"
            assert re.search(r"\bdefault", shown, re.I), f"{label}: {shown!r}"
            assert any(re.search(rf"(?<![\w.-]){re.escape(s)}(?![\w-])", shown)
                       for s in _spellings(action.default)), \
                f"{label}: default {action.default!r} not in {shown!r}"
            flat = " ".join(text.split())
            assert " ".join(shown.split())[:30] in flat, label     # and it is printed
            checked += 1
    assert checked or name in ("schema", "validate", "jobs", "cancel", "submit") or rest


def test_a_help_that_says_default_but_not_this_default_gets_it():
    from sluice.cli import DefaultsHelpFormatter

    parser = argparse.ArgumentParser(formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--n", type=int, default=4, help="how many (default 5)")
    parser.add_argument("--m", type=int, default=3, help="how many (default 3)")
    text = " ".join(parser.format_help().split())
    assert "how many (default 5) (default: 4)" in text
    assert "how many (default 3)" in text and "(default: 3)" not in text


def test_simulate_workload_help_lists_every_builtin_workload():
    from job_scheduler.simulation.bursty import BURSTY
    from job_scheduler.simulation.workloads import SCENARIOS

    parser = build_parser("simulate")[0]
    action = next(a for a in parser._actions if "--workload" in a.option_strings)
    shown = parser._get_formatter()._expand_help(action)
    for name in (*SCENARIOS, *BURSTY):
        assert name in shown, name
    assert "$SLUICE_WORKLOADS" in shown


def test_help_lists_the_slurm_forms(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    top = capsys.readouterr().out
    assert "sluice topology from-slurm" in top and "sluice validate --slurm" in top
    for command, needle in (("validate", "sluice validate --slurm"),
                            ("topology", "sluice topology from-slurm")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert needle in capsys.readouterr().out, command
    with pytest.raises(SystemExit) as done:            # and each form has its own help
        main(["topology", "from-slurm", "--help"])
    assert done.value.code == 0 and "--host-link-gbps" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main(["validate", "--slurm", "TOPOLOGY", "--help"])
    assert done.value.code == 0 and "--slurm" in capsys.readouterr().out


def test_demo_help_matches_its_arms_and_its_draw():
    from end_to_end.arms import ARMS
    from end_to_end.run import DEMO_TOPOLOGY
    from end_to_end.workload_draw import DrawSpec

    line = COMMANDS["demo"][1]
    assert f"{DrawSpec().jobs} jobs" in line and f"{len(ARMS)} arms" in line
    assert DEMO_TOPOLOGY in line
    assert all(re.search(rf"\b{key} ", line) for key in ARMS)
    description = " ".join(build_parser("demo")[0].description.split())
    assert f"{DrawSpec().jobs} jobs" in description and f"{len(ARMS)} arms" in description
    for arm in ARMS.values():
        assert f"{arm.key}: {arm.title}" in description


def test_version_prints_the_package_version_and_exits_0(capsys):
    from sluice import package_version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"sluice {package_version()}"


def test_version_falls_back_to_pyproject_when_not_installed(tmp_path, monkeypatch):
    import importlib.metadata

    from sluice import PYPROJECT, package_version

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "sluice"\nversion = "9.8.7"\n')
    assert package_version(pyproject) == "9.8.7"
    declared = re.search(r'^version = "([^"]+)"', PYPROJECT.read_text(), re.M).group(1)
    assert package_version() == declared
