"""``python -m mininet_tests.simulator_trust``: how far the discrete-event simulator is
from measured runs on the emulated fabric, the figures ``sluice whatif`` prints beside
its own.

    python -m mininet_tests.simulator_trust --demo RUN... [--heavy-tail RUN...] [--record FILE]

``--demo``: ``sluice demo`` runs, each its ``--out`` directory or its
``comparison.json``; every arm a-d's simulated average JCT on the run's own workload
against the measured one, within 10 % (``end_to_end.demo_trust``), twice: as the demo's
dry run simulates it (each uplink shared among the jobs sending at once) and as ``sluice
whatif`` does (each uplink's level split equally among its flows, the simulator its
table comes from). ``--heavy-tail``:
heavy-tail verdict runs of ``mininet_tests.experiment_priority``, each its directory,
its summary or its per-seed file; every mode's simulated mean JCT against the measured
one, within 15 % (``mininet_tests.heavy_tail_trust``). One table each, then the tally.
``--record FILE``: also write each kind's summary (``trust_verdict.summary``) with the
runs and the commit it was judged at; ``end_to_end/data/simulator_error.yaml`` is the
file ``sluice whatif`` reads, so that its figures carry the simulator's known error.

Exit 0 only when every comparison is within its bound; 1 when one is not or cannot be
judged (a run that cannot be read, a missing arm, a figure that is not a finite number,
a mode the simulator has no model of); 2 on bad input (no run given, a path that does
not exist).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from end_to_end import trust_verdict as tv
from sluice_common.errors import EXIT_BAD_INPUT, InputError


# (record key, uplink split, heading, what the record says it is)
DEMO_KINDS = (
    ("demo", "senders", "each uplink shared among the jobs sending at once, as the demo's "
     "dry run", "sluice demo's arms, average JCT, as the demo's dry run simulates them"),
    ("demo_whatif", "flows", "each uplink's level split equally among its flows, as sluice "
     "whatif", "sluice demo's arms, average JCT, as sluice whatif simulates them"),
)


def _paths(given: list[str], flag: str) -> list[Path]:
    missing = [p for p in given if not Path(p).exists()]
    if missing:
        raise InputError(f"argument {flag}", f"no such file or directory: {', '.join(missing)}")
    return [Path(p) for p in given]


def report(demo: list[Path], heavy_tail: list[Path]) -> tuple[str, int, dict]:
    """The printed tables and tally, the exit status, and each kind's summary."""
    from end_to_end import demo_trust
    from mininet_tests import heavy_tail_trust

    lines, rows, kinds = [], [], {}
    if demo:
        runs = [demo_trust.load_run(p) for p in demo]
        for kind, share, how, what in DEMO_KINDS:
            demo_rows = [r for run in runs for r in demo_trust.compare_run(run, share)]
            lines += [f"## The demo's arms: simulated (--exchange emulated, the run's "
                      f"workload, {how}) against measured average JCT, bound "
                      f"{demo_trust.BOUND_PCT:g} %", ""]
            lines += tv.table(demo_rows, "arm") + [""]
            rows += demo_rows
            kinds[kind] = {**tv.summary(demo_rows), "what": what,
                           "runs": [run.label for run in runs]}
        lines += [f"- {run.describe()}" for run in runs] + [""]
    if heavy_tail:
        ht_rows = [r for p in heavy_tail for r in heavy_tail_trust.compare_run(p)]
        lines += [f"## The heavy-tail verdict runs' modes: simulated against measured mean "
                  f"JCT (median over seeds), bound {heavy_tail_trust.BOUND_PCT:g} %", ""]
        lines += tv.table(ht_rows, "mode") + [""]
        lines += [heavy_tail_trust.NOTE, ""]
        rows += ht_rows
        kinds["heavy_tail"] = {**tv.summary(ht_rows),
                               "what": "heavy-tail verdict runs' modes, mean JCT",
                               "runs": [p.name for p in heavy_tail]}
    lines.append(tv.tally(rows))
    return "\n".join(lines), tv.exit_code(rows), kinds


def record(path: Path, kinds: dict) -> None:
    import datetime
    import subprocess

    import yaml

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).resolve().parent).stdout.strip()
    data = {"judged": datetime.date.today().isoformat(), "commit": commit or "unknown",
            "command": "python -m mininet_tests.simulator_trust " + " ".join(sys.argv[1:]),
            **kinds}
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mininet_tests.simulator_trust",
                                     description="The simulator against measured runs.")
    parser.add_argument("--demo", nargs="+", default=[], metavar="RUN",
                        help="sluice demo runs: each its --out directory or its "
                             "comparison.json (default none)")
    parser.add_argument("--heavy-tail", nargs="+", default=[], metavar="RUN",
                        help="heavy-tail verdict runs: each its directory, its summary or "
                             "its per-seed file (default none)")
    parser.add_argument("--record", metavar="FILE",
                        help="also write the summaries to FILE (YAML; default: none)")
    args = parser.parse_args(argv)
    try:
        if not args.demo and not args.heavy_tail:
            raise InputError("arguments", "no run given (--demo RUN... and/or "
                             "--heavy-tail RUN...)")
        demo = _paths(args.demo, "--demo")
        heavy_tail = _paths(args.heavy_tail, "--heavy-tail")
    except InputError as err:
        print(f"simulator_trust: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    text, code, kinds = report(demo, heavy_tail)
    print(text)
    if args.record:
        record(Path(args.record), kinds)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
