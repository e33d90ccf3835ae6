"""The stored verdicts judged again by the fail-closed checkers, beside what was printed.

    .venv/bin/python -m bench.fabric.rejudge_verdicts [--results bench/results]

prints markdown: one table per heavy-tail configuration (load, congestion control), a
row per stored verdict run, each bound's figure and verdict by
``mininet_tests.check_bounds`` with the verdict stored in its ``-check.txt`` beside it;
then one table of the demo verdicts by ``end_to_end.demo_bounds``, beside each seed's
stored ``-check.txt``. Reads the stored files only; exit 0 when every file was read, 2
when one cannot be.

What each run registered before it ran (``REGISTERED``, below) is from bench/HISTORY.md:
the seeds, the number of runs and the queue the rule is judged on. No heavy-tail verdict
registered a queue (each named the checker, which then picked the rule's best queue on
the run's own data), so each is judged on the checker's default queue, and the table
says so.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from end_to_end import demo_bounds
from end_to_end.demo_bounds_cli import load as load_comparison
from mininet_tests import check_bounds as cb

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


@dataclass(frozen=True)
class Registered:
    """A verdict run as registered before it ran."""
    name: str                 # the stored files' stem, after "verdict-" or before "-check"
    config: str               # the configuration (one table each)
    seeds: tuple[int, ...]
    queue: str | None         # the queue the rule was registered to be judged on; None: none
    where: str                # the bench/HISTORY.md entry that registered it


_NO_QUEUE = ("no queue registered (the registered checker picked the rule's best queue on the "
             "run's own data)")
REGISTERED = (
    Registered("0.7-bbr", "load 0.7, BBR", (6, 7, 8, 9, 10), None,
               "bench/HISTORY.md, 2026-11-28, the first verdict run (load 0.7, BBR, seeds 6-10)"),
    Registered("0.7-bbr-s11", "load 0.7, BBR", (11, 12, 13, 14, 15), None,
               "bench/HISTORY.md, 2026-11-29, strict priority in the exchange model: the "
               "verdict run at load 0.7, BBR, seeds 11-15"),
    Registered("0.9-bbr", "load 0.9, BBR", (6, 7, 8, 9, 10), None,
               "bench/HISTORY.md, 2026-11-29, the verdict run at load 0.9, BBR (seeds 6-10)"),
    Registered("0.9-bbr-s11", "load 0.9, BBR", (11, 12, 13, 14, 15), None,
               "bench/HISTORY.md, 2026-11-29, the verdict run at load 0.9, BBR (seeds 11-15)"),
    Registered("0.7-cubic", "load 0.7, CUBIC", (6, 7, 8, 9, 10), None,
               "bench/HISTORY.md, 2026-11-29, the verdict run at load 0.7, CUBIC (seeds 6-10)"),
    Registered("0.7-cubic-s11", "load 0.7, CUBIC", (11, 12, 13, 14, 15), None,
               "bench/HISTORY.md, 2026-11-29, the verdict run at load 0.7, CUBIC (seeds 11-15)"),
)


@dataclass(frozen=True)
class DemoRegistered:
    seed: int
    runs: int
    where: str


DEMO_REGISTERED = tuple(
    DemoRegistered(seed, demo_bounds.RUNS,
                   f"bench/HISTORY.md, 2026-11-29, the four-arm demo on seed {seed}: three "
                   f"runs of `make demo`, checker `end_to_end.demo_bounds_cli`")
    for seed in (49, 50, 51))

# each heavy-tail bound by what it compares, so that the new and the stored lines meet
_KINDS = (("every baseline run", "baselines in every seed"),
          ("every registered seed", "registered seeds"),
          ("mean JCT vs off:", "mean JCT vs off"),
          ("mean JCT vs ", "mean JCT vs hardest baseline"),
          ("p95 JCT vs ", "p95 JCT vs hardest baseline"),
          ("worst size bucket", "worst bucket vs hardest baseline"),
          ("bottleneck throughput", "bottleneck, of the hardest baseline's"),
          ("CPU wait", "CPU wait"),
          ("prediction error", "prediction error"))
_OLD_LINE = re.compile(r"^(?P<name>.*?): (?:(?P<value>[+-]?[\d.]+ %) )?\((?P<bound>[^)]*)\): "
                       r"(?P<word>met|NOT met|cannot judge)(?: \[(?P<detail>.*)\])?$")


def kind_of(line_or_name: str) -> str | None:
    for prefix, kind in _KINDS:
        if line_or_name.startswith(prefix) or f"{line_or_name}:".startswith(prefix):
            return kind
    return None


def parse_old_check(text: str) -> tuple[dict, dict]:
    """A stored heavy-tail ``-check.txt``: {kind: "figure verdict"} and its header
    (rule, best baseline, the last line)."""
    bounds, head = {}, {}
    for line in text.splitlines():
        m = _OLD_LINE.match(line)
        if m and kind_of(m["name"] + ":"):
            value = f"{m['value']} " if m["value"] else ""
            bounds[kind_of(m["name"] + ":")] = f"{value}{m['word']}"
        elif line.startswith("the rule on its best queue:"):
            got = re.match(r"the rule on its best queue: (\S+); best baseline: (\S+);", line)
            if got:
                head["rule"], head["best"] = got.groups()
        elif line.startswith("verdict:"):
            head["verdict"] = line[len("verdict:"):].strip()
    return bounds, head


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _new_cell(v: cb.Verdict) -> str:
    if not v.judged:
        return f"cannot judge: {v.detail}"
    value = "" if v.value is None else (f"{v.value:+.1f} % " if v.signed else f"{v.value:.1f} % ")
    return f"{value}{'met' if v.met else 'NOT met'}"


def heavy_tail_row(reg: Registered, results: Path) -> dict:
    """One stored verdict, judged again: its cells by column."""
    stem = results / "priority-rules" / f"verdict-{reg.name}"
    run = cb.load_run(Path(f"{stem}-summary.json"))
    queue = reg.queue or cb.RULE_QUEUE_DEFAULT
    what, found = cb.verdicts(run.per_seed, rule=cb.rule_of(run.summary), queue=queue,
                              registered_seeds=reg.seeds)
    old_bounds, old_head = parse_old_check(Path(f"{stem}-check.txt").read_text())
    missed = [v for v in found if not v.met]
    unjudged = [v for v in found if not v.judged]
    row = {
        "seeds": f"{reg.seeds[0]}-{reg.seeds[-1]}" if list(reg.seeds) == list(
            range(reg.seeds[0], reg.seeds[-1] + 1)) else ", ".join(map(str, reg.seeds)),
        "rule's queue (now)": f"{what['rule']}" + (
            f" ({reg.queue}, registered)" if reg.queue else
            f" (default queue {cb.RULE_QUEUE_DEFAULT}: none registered)"),
        "hardest baseline (now); paired mean JCT vs each": (
            f"{what['best_baseline'] or 'cannot judge'}; " + ", ".join(
                f"{b} {'n/a' if x is None else f'{x:+.1f} %'}" for b, x in what["against"].items())),
        "stored: rule, best baseline": f"{old_head.get('rule', '?')}, {old_head.get('best', '?')}",
    }
    for v in found:
        kind = kind_of(v.name + ":") or v.name
        old = old_bounds.get(kind, "no such line stored")
        row[kind] = f"{_new_cell(v)} (stored: {old})"
    row["verdict (now)"] = ("every bound met" if not missed else
                            f"{len(found) - len(missed)} of {len(found)} met "
                            f"({len(missed) - len(unjudged)} NOT met, "
                            f"{len(unjudged)} cannot judge)")
    row["verdict (stored)"] = old_head.get("verdict", "?")
    return row


def demo_row(reg: DemoRegistered, results: Path) -> dict:
    demo = results / "demo"
    cmps = [load_comparison(str(demo / f"seed{reg.seed}-run{k}-comparison.json"))
            for k in range(1, reg.runs + 1)]
    found = demo_bounds.verdicts(cmps)
    old = {}
    for line in (demo / f"seed{reg.seed}-check.txt").read_text().splitlines():
        m = re.match(r"^(met|NOT met|cannot judge): (.*?) -- ", line)
        if m:
            old[m[2]] = m[1]
    row = {"seed": str(reg.seed), "runs": str(len(cmps))}
    for v in found:
        word = "cannot judge" if not v.judged else "met" if v.met else "NOT met"
        row[v.bound] = f"{word}: {v.figures} (stored: {old.get(v.bound, 'no such line stored')})"
    met = sum(v.met for v in found)
    stored_met = sum(1 for w in old.values() if w == "met")
    row["verdict (now)"] = f"{met} of {len(found)} met"
    row["verdict (stored)"] = f"{stored_met} of {len(old)} met"
    return row


def table(rows: list[dict]) -> str:
    columns = list(dict.fromkeys(c for r in rows for c in r))
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def render(results: Path = RESULTS) -> str:
    out = []
    configs = list(dict.fromkeys(r.config for r in REGISTERED))
    for config in configs:
        regs = [r for r in REGISTERED if r.config == config]
        out += [f"### Heavy-tail verdicts at {config}, judged again by the fail-closed checker",
                "", table([heavy_tail_row(r, results) for r in regs]), ""]
        out += [f"- seeds {r.seeds[0]}-{r.seeds[-1]}: registered in {r.where}; "
                f"{'queue ' + r.queue if r.queue else _NO_QUEUE}." for r in regs]
        out.append("")
    out += ["### Demo verdicts, judged again by the fail-closed checker", "",
            table([demo_row(r, results) for r in DEMO_REGISTERED]), ""]
    out += [f"- seed {r.seed}: registered in {r.where}." for r in DEMO_REGISTERED]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fabric.rejudge_verdicts",
                                 description="The stored verdicts, judged again.")
    ap.add_argument("--results", type=Path, default=RESULTS,
                    help="the stored results' directory (default: bench/results)")
    args = ap.parse_args(argv)
    try:
        text = render(args.results)
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"rejudge_verdicts: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
