"""The ``sluice`` command: one entry point, one subcommand per user task.

Each subcommand lives next to the component it drives; this module only dispatches.
A subcommand module provides ``configure_<name>(parser)`` and ``run_<name>(args) -> int``.
Modules are imported lazily so that ``sluice validate`` does not pay for torch, MXNet or
Mininet. Every parser built here states each option's default in its help
(:class:`DefaultsHelpFormatter`), whichever module defined the option.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

from sluice_common.errors import EXIT_BAD_INPUT, InputError

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("job_scheduler.simulation.cli", "check job description YAML files (with "
                 "--cap-gpus: print one with max_gpus capped)"),
    "schema": ("sluice.schema_cli", "print the JSON Schema of the job or topology file"),
    "simulate": ("job_scheduler.simulation.cli", "compare scheduling policies in the discrete-event simulator"),
    "topology": ("topologies.cli", "list the built-in topologies, show or check one"),
    "fabric": ("mininet_tests.cli", "bring up the Mininet/OVS fabric, check it, clean up"),
    "controller": ("controller.cli", "run the OpenFlow 1.3 controller (os-ken) with its northbound API"),
    "profile": ("ps_runtime.cli", "profile Cost_bat(1) and alpha(b) on the real device"),
    "calibrate": ("mininet_tests.calibration.cli", "fit the package's data files on your fabric: "
                  "the exchange model's constants, its queue stages, the short FIFO's depth, "
                  "the derived P100 profile, the PS runtime's launch, close and server "
                  "time per worker"),
    "train": ("ps_runtime.cli", "run one PS training job on local processes"),
    "run": ("end_to_end.cli", "schedule YAML jobs onto the Mininet fabric and run them for "
            "real (--dry-run: print the plan only)"),
    "demo": ("end_to_end.cli", "the end-to-end demo on two-rack-100g: 10 jobs drawn from "
             "the Philly trace, run by 4 arms (a Slurm today, b + sluice's priority, "
             "c sluice's scheduler, d both)"),
    "whatif": ("end_to_end.whatif_cli", "what sluice buys on your cluster: the demo's four "
               "arms in the simulator on your trace and topology, at its load or another"),
    "scheduler": ("job_scheduler.service.cli", "run the scheduler as a service"),
    "submit": ("job_scheduler.service.cli", "submit a job YAML file to the scheduler service"),
    "jobs": ("job_scheduler.service.cli", "list the scheduler service's jobs"),
    "cancel": ("job_scheduler.service.cli", "cancel a job in the scheduler service"),
}

# Forms of a command served by a module of a higher layer than the command's own (the
# topology package sits below the scheduler's Slurm client): (command, argument) ->
# (module, suffix of its configure_/run_ functions, help).
ROUTES: dict[tuple[str, str], tuple[str, str, str]] = {
    ("topology", "from-slurm"): ("job_scheduler.service.slurm_topology_cli", "from_slurm",
                                 "write a topology YAML from a running Slurm cluster's nodes "
                                 "and topology.conf"),
    ("validate", "--slurm"): ("job_scheduler.service.slurm_topology_cli", "validate_slurm",
                              "check a topology against a running Slurm cluster"),
}
# how each form is spelled in help texts
ROUTE_USAGE = {("topology", "from-slurm"): "sluice topology from-slurm",
               ("validate", "--slurm"): "sluice validate --slurm TOPOLOGY"}


# ---- help texts ------------------------------------------------------------------------

def shows_default(action: argparse.Action) -> bool:
    """Whether the help of ``action`` owes the reader its default: an option (or an
    optional positional) that takes a value and has one; flags (store_true and the
    like) take none."""
    if action.default is None or action.default is argparse.SUPPRESS or action.nargs == 0:
        return False
    return bool(action.option_strings) or action.nargs in (argparse.OPTIONAL,
                                                           argparse.ZERO_OR_MORE)


def default_spellings(default) -> list[str]:
    """The ways a help text may write ``default``: 10.0 also as 10, a list joined by
    commas."""
    out = [str(default)]
    if isinstance(default, float):
        out.append(f"{default:g}")
    if isinstance(default, (list, tuple)):
        out.append(",".join(map(str, default)))
    return out


def states_default(help_text: str, default) -> bool:
    """Whether ``help_text`` already says what ``default`` is (the word default and the
    value), or will (``%(default)s``)."""
    if "%(default)" in help_text:
        return True
    if not re.search(r"\bdefault", help_text, re.IGNORECASE):
        return False
    return any(re.search(rf"(?<![\w.-]){re.escape(s)}(?![\w-])", help_text)
               for s in default_spellings(default) if s)


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """argparse's help, each option's default appended where its help does not say it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if shows_default(action) and not states_default(text, action.default):
            text += " (default: %(default)s)"
        return text


class RawDefaultsHelpFormatter(DefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The same for a parser whose description and epilog are laid out by hand."""


def _parsers(parser: argparse.ArgumentParser):
    """``parser`` and every subcommand parser under it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def _state_defaults(parser: argparse.ArgumentParser) -> None:
    """Every parser under ``parser`` formats its help with the defaults; an option with
    a default but no help gets the default as its help (argparse prints nothing for it
    otherwise)."""
    for one in _parsers(parser):
        raw = issubclass(one.formatter_class, argparse.RawDescriptionHelpFormatter)
        one.formatter_class = RawDefaultsHelpFormatter if raw else DefaultsHelpFormatter
        for action in one._actions:
            if action.help is None and shows_default(action):
                action.help = "(default: %(default)s)"


def _route(name: str, rest: list[str]):
    for (command, arg), target in ROUTES.items():
        if command == name and any(a == arg or a.startswith(arg + "=") for a in rest):
            return target
    return None


def _route_lines(name: str | None = None) -> list[str]:
    return [f"  {ROUTE_USAGE[key]:<34} {text}" for key, (_, _, text) in ROUTES.items()
            if name is None or key[0] == name]


def _top_parser() -> argparse.ArgumentParser:
    from sluice import __version__

    epilog = ("commands:\n" + "\n".join(f"  {n:<11} {h}" for n, (_, h) in COMMANDS.items())
              + "\n\nmore forms (each with its own --help):\n" + "\n".join(_route_lines()))
    parser = argparse.ArgumentParser(
        prog="sluice", description="Application-aware scheduling of parameter-server training jobs.",
        epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"sluice {__version__}")
    parser.add_argument("command", choices=sorted(COMMANDS), metavar="COMMAND")
    return parser


def build_parser(name: str, rest: list[str] | tuple[str, ...] = ()):
    """The parser of ``sluice NAME REST...``: (parser, module, function suffix, the
    arguments it parses), the form ``rest`` selects (ROUTES) taken into account."""
    rest = list(rest)
    module_name, help_text = COMMANDS[name]
    suffix, prog = name, f"sluice {name}"
    route = _route(name, rest)
    if route is not None:
        module_name, suffix, help_text = route
        if rest and rest[0] == "from-slurm":
            rest, prog = rest[1:], f"sluice {name} from-slurm"
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=prog, description=help_text)
    getattr(module, f"configure_{suffix}")(parser)
    forms = _route_lines(name) if route is None else []
    if forms:
        parser.epilog = ((parser.epilog + "\n\n") if parser.epilog else "") + \
            "more forms (each with its own --help):\n" + "\n".join(forms)
        if not issubclass(parser.formatter_class, argparse.RawDescriptionHelpFormatter):
            parser.formatter_class = argparse.RawDescriptionHelpFormatter
    _state_defaults(parser)
    return parser, module, suffix, rest


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        _top_parser().print_help(sys.stderr)
        return EXIT_BAD_INPUT
    if argv[0] not in COMMANDS:
        _top_parser().parse_args(argv[:1])   # --help, --version exit 0; an unknown command exits 2
        return EXIT_BAD_INPUT
    name = argv[0]
    parser, module, suffix, rest = build_parser(name, argv[1:])
    args = parser.parse_args(rest)
    try:
        return int(getattr(module, f"run_{suffix}")(args) or 0)
    except InputError as err:
        for one in err.errors:       # every problem of the input, one line each
            print(f"sluice {name}: error: {one}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"sluice {name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`sluice simulate | head`): nothing more to say to it; stdout
        # goes to /dev/null so that the interpreter's own flush at exit stays quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as err:
        # the machine, not the code (no fabric, no Slurm, a path it may not write): one
        # line, exit 1; anything else is a bug and keeps its traceback
        said = environment_error(err)
        if said is None or os.environ.get(TRACEBACK_ENV):
            raise
        print(f"sluice {name}: error: {said}", file=sys.stderr)
        return 1


TRACEBACK_ENV = "SLUICE_TRACEBACK"    # set: every error shows its traceback too
# Errors of the environment a command runs in, by (module, class): one line each. A
# module not imported yet cannot have raised its error (and is not imported for it).
ENVIRONMENT_ERRORS = (("mininet_fabric.lock", "FabricError"),
                      ("slurm_client.client", "SlurmUnavailable"),
                      ("ps_runtime.transport_install", "TransportMissing"))
_PATH_ERRORS = (PermissionError, FileNotFoundError, FileExistsError, NotADirectoryError,
                IsADirectoryError)


def environment_error(err: BaseException) -> str | None:
    """The one line that tells ``err`` when it is an error of the environment (None: a
    bug, shown with its traceback)."""
    for module, kind in ENVIRONMENT_ERRORS:
        cls = getattr(sys.modules.get(module), kind, None)
        if cls is not None and isinstance(err, cls):
            return str(err)
    if isinstance(err, _PATH_ERRORS) and err.filename:
        where = str(err.filename) + (f" -> {err.filename2}" if err.filename2 else "")
        return f"{where}: {err.strerror or err}"
    return None
