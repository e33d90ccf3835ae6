"""README.md is a user's page: short, the two commands and the quick start first, and a
table of main commands that matches the `sluice` command's parser."""

import argparse
import importlib
import re

from sluice.cli import COMMANDS, ROUTES
from support.paths import REPO

README = REPO / "README.md"
TABLE_HEADING = "## Main commands"


def commands_table(text: str) -> list[str]:
    """The first cells of the table under TABLE_HEADING."""
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [row.split("|")[1].strip() for row in rows[2:]]      # past header and rule


def named_commands(cell: str) -> list[list[str]]:
    """Each `sluice WORD [WORD]` a cell names, as its words."""
    return [m.split() for m in re.findall(r"`sluice ([a-z][\w -]*?)`", cell)]


def _positional_words(name: str) -> set[str]:
    """The words a command takes as its first positional (subcommands, choices)."""
    module_name = COMMANDS[name][0]
    parser = argparse.ArgumentParser(prog=f"sluice {name}")
    getattr(importlib.import_module(module_name), f"configure_{name}")(parser)
    words = {arg for (command, arg), _ in ROUTES.items() if command == name}
    for action in parser._actions:
        if not action.option_strings and action.choices is not None:
            words |= set(action.choices)
            break
    return words


def test_the_table_parses_a_hand_made_table():
    text = ("x\n## Main commands\n\n| command | what |\n| --- | --- |\n"
            "| `sluice run` | a |\n| `sluice fabric check` / `sluice jobs` | b |\n## next\n"
            "| `sluice nope` | not in the table |\n")
    cells = commands_table(text)
    assert cells == ["`sluice run`", "`sluice fabric check` / `sluice jobs`"]
    assert named_commands(cells[1]) == [["fabric", "check"], ["jobs"]]


def test_every_command_the_table_names_exists_in_the_parser():
    cells = commands_table(README.read_text())
    assert cells, f"no table under {TABLE_HEADING!r} in README.md"
    for cell in cells:
        names = named_commands(cell)
        assert names, f"README.md commands table: a row names no `sluice COMMAND`: {cell}"
        for words in names:
            assert words[0] in COMMANDS, f"README.md names `sluice {words[0]}`, no such command"
            if len(words) > 1 and not words[1].startswith("-"):
                assert words[1] in _positional_words(words[0]), \
                    f"README.md names `sluice {' '.join(words)}`: no such form"


def test_every_command_of_the_parser_is_in_the_table():
    named = {words[0] for cell in commands_table(README.read_text())
             for words in named_commands(cell)}
    missing = sorted(set(COMMANDS) - named)
    assert not missing, f"README.md's commands table lacks {missing} (see sluice/cli.py)"


def test_readme_is_short_with_the_two_commands_and_the_quick_start_first():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200)"
    head = "\n".join(lines[:60])
    assert "make demo" in head and "make test" in head
    starts = [i for i, line in enumerate(lines) if line.startswith("## Quick start")]
    assert starts, "README.md has no '## Quick start'"
    end = next(i for i in range(starts[0] + 1, len(lines)) if lines[i].startswith("## "))
    assert end <= 60, f"README.md's quick start ends at line {end}, after line 60"


def test_readme_points_at_nothing_a_user_does_not_have():
    text = README.read_text()
    assert "../shared" not in text
    for target in re.findall(r"\]\(([^)#]+)", text):
        if "://" not in target:
            assert (REPO / target).exists(), f"README.md links to {target}, which is not there"
