"""``sluice calibrate exchange|queues|fifo-depth|profile|runtime|checkpoint``: the fits behind the data files.

- ``exchange [--write] [--json [OUT]] [--from JSON]``: measure the exchange model's points
  on the fabric (about 7 minutes, root, the fabric lock) or take an earlier run's
  ``--json`` output, fit, print; ``--write`` replaces
  ``sluice_common/data/exchange_constants.yaml``.
- ``queues --stage NAME [--stage ...] [--from JSON ...] [--write] [--json [OUT]]``: the
  queue stages alone, on top of the shipped constants.
- ``fifo-depth --out DIR [--depths ...] [--load L] [--seed-list ...] [--cc ...] [--from]
  [--record SECTION]``: sweep the short FIFO's depth with the heavy-tail mix; ``--record``
  enters the best in ``mininet_fabric/data/fifo_depths.yaml``.
- ``profile [--out PATH]``: write the derived P100 compute profile (no fabric).
- ``runtime RUN_DIR... [--write]``: the PS runtime's launch, close and server time per
  worker, medians over the jobs of ``sluice demo`` runs (no fabric); ``--write`` replaces
  ``sluice_common/data/runtime_overheads.yaml``.
- ``checkpoint RUN_DIR... [--write]``: what a suspension's checkpoint costs (write and
  read rates, the rest of its hold), medians over the suspensions of ``sluice demo`` runs
  (no fabric); ``--write`` replaces ``sluice_common/data/checkpoint_costs.yaml``.

Exit codes: 0 ok, 1 the fabric could not run, 2 bad input (nothing written).
"""

from __future__ import annotations

from pathlib import Path

from sluice_common.errors import InputError, InputErrors

DEPTHS = "5,11,25,50,100"
SEEDS = "1,2,3,4,5"
LOAD = 0.7
CCS = ("machine", "bbr", "cubic")


def configure_calibrate(parser) -> None:
    from mininet_tests.calibration.queues import STAGES

    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    exchange = sub.add_parser("exchange", help="fit the exchange model's constants on the "
                                               "fabric (or to a stored run)")
    queues = sub.add_parser("queues", help="fit queue stages of the exchange model alone, on "
                                           "top of the shipped constants")
    fifo = sub.add_parser("fifo-depth", help="sweep the short FIFO's depth with the heavy-tail "
                                             "mix and enter the best one")
    profile = sub.add_parser("profile", help="write the P100 compute profile derived from "
                                             "published throughputs (no fabric)")
    # the two measured on stored demo runs: their directories in, one data file out
    for name, what, data_file in (
            ("runtime", "the PS runtime's launch, close and server time per worker",
             "runtime_overheads.yaml"),
            ("checkpoint", "what a suspension's checkpoint costs, from their suspensions",
             "checkpoint_costs.yaml")):
        from_runs = sub.add_parser(name, help=f"measure {what} on `sluice demo` runs (no fabric)")
        from_runs.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                               help="`sluice demo --out` directories")
        from_runs.add_argument("--write", action="store_true",
                               help=f"write the medians to sluice_common/data/{data_file} "
                                    "(default: print only)")
    for p in (exchange, queues, fifo):
        p.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT",
                       help="write the fit's figures as JSON to OUT (stdout without OUT; "
                            "default: none)")
    exchange.add_argument("--write", action="store_true",
                          help="write the fit to sluice_common/data/exchange_constants.yaml")
    exchange.add_argument("--from", dest="from_json", default=None, metavar="JSON",
                          help="fit the measurements of an earlier run's --json output "
                               "(default: measure on the fabric)")
    queues.add_argument("--stage", action="append", choices=sorted(STAGES), required=True,
                        help="a stage to fit (repeatable; the stages are fitted together)")
    queues.add_argument("--write", action="store_true",
                        help="write the fitted constants to "
                             "sluice_common/data/exchange_constants.yaml")
    queues.add_argument("--from", dest="from_json", action="append", default=None, metavar="JSON",
                        help="take a stage's measurements from an earlier run's --json output "
                             "(repeatable; no fabric for the stages they have, the others are "
                             "measured; default: none, every stage measured)")
    fifo.add_argument("--depths", default=DEPTHS,
                      help="FIFO depths in packets per level, separated by commas (the deep "
                           f"FIFO's is always run; default {DEPTHS})")
    fifo.add_argument("--load", type=float, default=LOAD,
                      help=f"offered bottleneck load, in (0, 1) (default {LOAD:g})")
    fifo.add_argument("--seed-list", default=SEEDS,
                      help=f"tuning seeds, separated by commas, never a verdict's (default {SEEDS})")
    fifo.add_argument("--cc", default="machine", choices=CCS,
                      help="the hosts' TCP congestion control (default machine: the machine's)")
    fifo.add_argument("--out", required=True, metavar="DIR",
                      help="the sweep's run folder (the heavy-tail experiment's --out)")
    fifo.add_argument("--record", default=None, metavar="SECTION",
                      help="enter the best depth in mininet_fabric/data/fifo_depths.yaml, "
                           "naming the RESULTS section with this sweep (default: not entered)")
    fifo.add_argument("--from", dest="from_dir", action="store_true",
                      help="read the finished sweep in --out again (no fabric)")
    profile.add_argument("--out", type=Path, default=None, metavar="PATH",
                         help="where to write the profile (default: the shipped "
                              "sluice_common/data/p100_profile.yaml, the one `--profile p100` "
                              "reads)")


def int_list(text: str, flag: str, least: int) -> tuple[int, ...]:
    """Integers separated by commas, each at least ``least``; else an error naming ``flag``."""
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"argument {flag}", f"integers separated by commas, got {text!r}") \
            from None
    if any(v < least for v in values):
        raise InputError(f"argument {flag}", f"each must be at least {least}, got {text!r}")
    return values


def _fifo_options(depths: str, seed_list: str,
                  load: float) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The sweep's depths and seeds; every bad option at once (exit 2, nothing run)."""
    problems, values = [], {}
    for flag, text, least in (("--depths", depths, 1), ("--seed-list", seed_list, 0)):
        try:
            values[flag] = int_list(text, flag, least)
        except InputError as err:
            problems.append(err)
    if not 0 < load < 1:
        problems.append(InputError("argument --load", f"must be in (0, 1), got {load:g}"))
    if problems:
        raise problems[0] if len(problems) == 1 else InputErrors(problems)
    return values["--depths"], values["--seed-list"]


def run_calibrate(args) -> int:
    if args.action == "exchange":
        from mininet_tests.calibration.exchange import calibrate

        return calibrate(args.write, args.from_json, args.json)
    if args.action == "queues":
        from mininet_tests.calibration import queues

        return queues.calibrate(tuple(args.stage), list(args.from_json or []), args.write, args.json)
    if args.action == "fifo-depth":
        from mininet_tests.calibration.fifo_depth import sweep

        depths, seeds = _fifo_options(args.depths, args.seed_list, args.load)
        return sweep(depths, args.load, seeds, args.cc, Path(args.out), args.record,
                     args.from_dir, args.json)
    if args.action == "runtime":
        from mininet_tests.calibration.runtime import calibrate as runtime

        return runtime(list(args.runs), args.write)
    if args.action == "checkpoint":
        from mininet_tests.calibration.checkpoint import calibrate as checkpoint

        return checkpoint(list(args.runs), args.write)
    from mininet_tests.calibration.p100_profile import derive
    from sluice_common.profile import P100_PROFILE_PATH

    print(f"wrote {derive(args.out or P100_PROFILE_PATH)}")
    return 0
