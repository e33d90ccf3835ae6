"""docs/api.md, docs/metrics.md and docs/cli.md are what the code generates (no drift)."""

import argparse

from sluice.reference import api_markdown, metrics_markdown
from sluice.reference import main as reference_main
from sluice.reference_cli import CLI_COMMAND, cli_markdown, command_parsers
from support.paths import REPO

DOCS = REPO / "docs"


def test_api_reference_is_current():
    assert (DOCS / "api.md").read_text() == api_markdown(), \
        "run `python -m sluice.reference docs/`"


def test_metrics_reference_is_current():
    assert (DOCS / "metrics.md").read_text() == metrics_markdown(), \
        "run `python -m sluice.reference docs/`"


def test_cli_reference_is_current():
    assert (DOCS / "cli.md").read_text() == cli_markdown(), \
        f"run `{CLI_COMMAND}`"


def test_cli_reference_names_every_form_and_option():
    page = cli_markdown()
    for title, parser in command_parsers():
        assert f"`sluice {title}`" in page
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                assert f"`{flag}`" in page, (title, flag)


def test_cli_reference_covers_every_subcommand_of_a_command():
    from mininet_tests.cli import configure_fabric
    parser = argparse.ArgumentParser(prog="sluice fabric")
    configure_fabric(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    page = cli_markdown()
    for name, sub_parser in sub.choices.items():
        assert f"### `sluice fabric {name}`" in page
        for action in sub_parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                assert f"`{flag}`" in page


def test_cli_reference_is_the_same_whatever_the_terminal_and_environment(monkeypatch):
    expected = cli_markdown()
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("HOME", "/elsewhere")
    monkeypatch.setenv("XDG_STATE_HOME", "/elsewhere/state")
    monkeypatch.setenv("SLUICE_REPORT_HINTS", "off")
    assert cli_markdown() == expected
    assert "/elsewhere" not in expected


def test_cli_regeneration_command_writes_the_page(tmp_path, capsys):
    out = tmp_path / "cli.md"
    assert CLI_COMMAND.split()[-2:] == ["--cli", "docs/cli.md"]
    assert reference_main(["--cli", str(out)]) == 0
    assert out.read_text() == cli_markdown()
    assert CLI_COMMAND in out.read_text().splitlines()[2]
    assert reference_main(["--cli"]) == 2 and "usage" in capsys.readouterr().err
