"""The command-line reference, docs/cli.md, generated from the parsers the `sluice`
command builds (sluice/cli.py's COMMANDS and ROUTES): every form of the command with its
help, its usage line and a table of its options with their defaults.

    python -m sluice.reference --cli docs/cli.md

tests/unit/sluice/test_reference.py fails when docs/cli.md is not what this writes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os

CLI_COMMAND = "python -m sluice.reference --cli docs/cli.md"


def command_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every form of the `sluice` command with the parser `sluice.cli.main` builds for it:
    one per subcommand, then the forms another module serves (`sluice.cli.ROUTES`)."""
    from sluice import cli

    forms = [(name, module, name, help_text)
             for name, (module, help_text) in cli.COMMANDS.items()]
    for (name, arg), (module, suffix, help_text) in cli.ROUTES.items():
        forms.append((f"{name} {arg}", module, suffix, help_text))
    parsers = []
    with _reference_environment():
        for title, module_name, suffix, help_text in forms:
            parser = argparse.ArgumentParser(
                prog=f"sluice {title.split(' --')[0]}", description=help_text)
            getattr(importlib.import_module(module_name), f"configure_{suffix}")(parser)
            parsers.append((title, parser))
    return parsers


_HOME = "/sluice-reference-home"          # written back as `~`


@contextlib.contextmanager
def _reference_environment():
    """Some defaults come from the environment when the parser is built (a SLUICE_*
    variable, the home folder): the page shows them as a user without those variables
    sees them, with the home folder as `~`, so it is the same on every machine."""
    saved = dict(os.environ)
    try:
        for name in list(os.environ):
            if name.startswith("SLUICE_") or name.startswith("XDG_"):
                del os.environ[name]
        os.environ["HOME"] = _HOME
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class _FixedWidth(argparse.HelpFormatter):
    """Usage lines wrapped at one width whatever the terminal, so the page is the same
    wherever it is generated."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=88)


def _usage_of(parser: argparse.ArgumentParser) -> str:
    formatter = _FixedWidth(parser.prog)      # whatever formatter the command chose
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    return parser._get_formatter()._expand_help(action).replace(_HOME, "~")


def _default_of(action: argparse.Action) -> str:
    if action.required or action.default in (None, argparse.SUPPRESS) or isinstance(
            action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "required" if action.required and action.option_strings else ""
    return f"`{str(action.default).replace(_HOME, '~')}`"


def _argument_of(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None:
        return "`" + "\\|".join(str(c) for c in action.choices) + "`"
    return f"`{action.metavar or action.dest.upper()}`"


def _parser_markdown(title: str, parser: argparse.ArgumentParser, depth: int) -> list[str]:
    lines = ["#" * depth + f" `sluice {title}`", "", _cell(parser.description or ""), "",
             "```", _usage_of(parser), "```", ""]
    rows, subcommands = [], None
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            subcommands = action
            continue
        name = ", ".join(f"`{s}`" for s in action.option_strings) or \
            f"`{action.metavar or action.dest}` (positional)"
        rows.append(f"| {name} | {_argument_of(action)} | {_default_of(action)} | "
                    f"{_cell(_help_of(parser, action))} |")
    if rows:
        lines += ["| option | argument | default | help |", "| --- | --- | --- | --- |",
                  *rows, ""]
    if subcommands is not None:
        helps = {a.dest: a.help for a in subcommands._choices_actions}
        for sub_name, sub_parser in subcommands.choices.items():
            sub_parser.description = sub_parser.description or helps.get(sub_name, "")
            lines += _parser_markdown(f"{title} {sub_name}", sub_parser, depth + 1)
    return lines


def cli_markdown() -> str:
    parsers = command_parsers()
    lines = ["# Command-line reference", "",
             "Generated from the `sluice` command's parsers (sluice/reference_cli.py) by "
             f"`{CLI_COMMAND}` (also written by `python -m sluice.reference docs/`); "
             "tests/unit/sluice/test_reference.py fails when this page is not what that "
             "writes. `sluice COMMAND --help` prints the same; defaults read from the "
             "environment are shown as they are without any `SLUICE_*` variable set. Bad "
             "input exits with status 2 and a message naming the file, the field and the "
             "reason.", "",
             "| command | what it does |", "| --- | --- |"]
    lines += [f"| [`sluice {title}`](#{_anchor(title)}) | {_cell(parser.description)} |"
              for title, parser in parsers]
    lines.append("")
    for title, parser in parsers:
        lines += _parser_markdown(title, parser, 2)
    return "\n".join(lines).rstrip() + "\n"


def _anchor(title: str) -> str:
    """GitHub's anchor of the heading `` `sluice TITLE` ``."""
    text = f"sluice {title}".lower()
    return "".join(c for c in text.replace(" ", "-") if c.isalnum() or c in "-_")

