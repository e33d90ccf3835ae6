"""The verdict on the heavy-tail experiment's bounds, from its per-seed figures.

    .venv/bin/python -m mininet_tests.check_bounds RUN_DIR|SUMMARY.json|PER_SEED.json [--queue Q]

prints one line per bound (value, bound, ``met``, ``NOT met`` or ``cannot judge``) and a
last line with the count; exit status 0 when every bound is met, 1 when one is not met or
cannot be judged, 2 when the input cannot be read.

The bounds are the project's, fixed here and never moved by a model or by a run's data.
The default ranking rule is judged on one switch queue, named before the run starts: the
run's configuration records it (``rule_queue`` in its summary, set by the experiment's
``--rule-queue``; default ``off``, the deep FIFO, where the rule's mode is the rule's own
name). ``--queue Q`` judges it on another queue (``off``, ``off-shallow``, ``off-fair``,
... or the mode's name, ``remaining+off-fair``); a summary without ``rule_queue`` is
judged on the default queue, and the first line says so. The queue is never picked from
the data being judged.

The rule is compared with ``off`` and with the hardest baseline: for each registered
baseline (``off``, ``off-shallow``, ``off-fair``, ``pias``, ...) the rule's mean JCT change
against it, paired per seed, median over seeds; the hardest is the one where that figure
is highest (where the rule looks worst). The header prints the figure against every
baseline. The bounds:

- mean JCT at least 30 % below ``off`` and 20 % below the hardest baseline;
- p95 JCT at most 10 % above the hardest baseline's;
- no size bucket's mean slowdown more than 10 % above the hardest baseline's (a bucket
  is judged over the seeds whose mix has it, and only when at least three seeds do);
- bottleneck throughput at least 95 % of the hardest baseline's;
- CPU wait under 10 % of every mode's mean JCT;
- every mode's predicted mean JCT (computed before the run) within 15 % of measured.

Every comparison is paired per seed (this mode against the other in the same seed), and the
median over seeds is the figure judged. The checker fails closed: a bound is ``cannot
judge`` (and counts as not met) when a figure it needs is missing, not a finite number
(NaN, inf, text), when a mode it needs is missing from any seed, when the figures lack a
seed the run registered (``registered_seeds`` in the summary; an older summary's
``seeds``), or when a size bucket is in fewer than three seeds; the line names the mode,
the seed, the field or the bucket.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from mininet_fabric import baselines as bl
from sluice_common import rank_rules
from sluice_common.rank_rules import DEFAULT_RULE

MEAN_JCT_VS_OFF_PCT = -30.0
MEAN_JCT_VS_BEST_PCT = -20.0
P95_ABOVE_BEST_PCT = 10.0
SLOWDOWN_ABOVE_BEST_PCT = 10.0
BOTTLENECK_OF_BEST_PCT = 95.0
CPU_WAIT_SHARE = 0.10
PREDICTION_ERROR_PCT = 15.0
MIN_SEEDS_PER_BUCKET = 3
RULE_QUEUE_DEFAULT = "off"
_SHOWN_PROBLEMS = 6          # a line names this many problems, then counts the rest


@dataclass(frozen=True)
class Verdict:
    name: str
    value: float | None      # the judged figure (None: it could not be computed)
    bound: str               # the bound, as printed
    met: bool
    detail: str = ""
    signed: bool = True      # a change (+/-) rather than a level
    judged: bool = True      # False: a figure it needs is missing ("cannot judge")

    def line(self) -> str:
        extra = f" [{self.detail}]" if self.detail else ""
        if not self.judged:
            return f"{self.name}: cannot judge ({self.bound}){extra}"
        value = ("" if self.value is None else
                 f"{self.value:+.1f} % " if self.signed else f"{self.value:.1f} % ")
        return f"{self.name}: {value}({self.bound}): {'met' if self.met else 'NOT met'}{extra}"


class _NoFigure(Exception):
    """A figure that cannot be computed; its message says which field and why."""


def rule_mode(baseline: str, rule: str = DEFAULT_RULE) -> str:
    """The mode that runs ``rule`` on ``baseline``'s queues (the deep FIFO's is the rule's)."""
    return rule if baseline == "off" else f"{rule}+{baseline}"


def queue_of(name: str, rule: str = DEFAULT_RULE) -> str:
    """The queue ``name`` means: a queue (``off-fair``) or the rule's mode on it
    (``remaining+off-fair``, ``remaining``). ValueError when it is neither."""
    queues = bl.queues()
    if name in queues:
        return name
    for q in queues:
        if name == rule_mode(q, rule):
            return q
    raise ValueError(f"queue {name!r} is not one of {', '.join(queues)} (nor the rule "
                     f"{rule!r} on one of them)")


def _number(value, what: str) -> float:
    """``value`` as a finite number, or _NoFigure naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _NoFigure(f"{what} is {value!r}")
    return float(value)


def _get(record: dict, mode: str, *path: str) -> float:
    value = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return _number(value, f"{mode} {'.'.join(path)}")


def _pct(a: float, b: float, what: str) -> float:
    if b <= 0:
        raise _NoFigure(f"{what} is {b!r} (a change needs a positive base)")
    return 100.0 * (a / b - 1.0)


def _problems_text(problems: list[str]) -> str:
    shown = problems[:_SHOWN_PROBLEMS]
    more = len(problems) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def _missing_from(seed_record: dict, *modes: str) -> str | None:
    """'A, B missing from seed N' for the modes a seed's record lacks; None when it has all."""
    missing = [m for m in dict.fromkeys(modes) if m not in seed_record["modes"]]
    return (f"{', '.join(missing)} missing from seed {seed_record.get('seed')}"
            if missing else None)


def _paired(per_seed: list[dict], mode: str, other: str, figure) -> tuple[float | None, list[str]]:
    """Median over every seed of ``figure(seed, mode's record, other's record)``, and what
    kept it from being computed (a mode missing from a seed, a field not a finite number):
    the median is None when anything is."""
    values, problems = [], []
    for s in per_seed:
        seed = s.get("seed")
        missing = _missing_from(s, mode, other)
        if missing:
            problems.append(missing)
            continue
        try:
            values.append(_number(figure(s["modes"][mode], s["modes"][other]), "the figure"))
        except _NoFigure as err:
            problems.append(f"seed {seed}: {err}")
    if problems or not values:
        return None, problems or ["no seed"]
    return statistics.median(values), []


def _mean_change(rule: str, other: str):
    return lambda a, b: _pct(_get(a, rule, "mean_jct_s"), _get(b, other, "mean_jct_s"),
                             f"{other} mean_jct_s")


def against_every_baseline(per_seed: list[dict], mode: str, baselines) -> dict:
    """For each baseline, the rule's mean JCT change against it (paired per seed, median
    over seeds) and what kept it from being computed: ``{b: (value, problems)}``."""
    return {b: _paired(per_seed, mode, b, _mean_change(mode, b)) for b in baselines}


def hardest_baseline(against: dict) -> tuple[str | None, list[str]]:
    """The baseline the rule looks worst against (the highest paired mean JCT change);
    None, with the reasons, when any baseline's figure is missing (it might be that one)."""
    problems = [f"vs {b}: {p}" for b, (_, ps) in against.items() for p in ps]
    if problems or not against:
        return None, problems or ["no baseline in the run"]
    return max(against, key=lambda b: against[b][0]), []


def _bucket_figure(per_seed: list[dict], rule: str, best: str) -> tuple[float | None, list[str], str]:
    """The worst size bucket's slowdown change (each bucket: paired over the seeds whose
    mix has it, median), what kept it from being judged, and every bucket's figure."""
    problems, per_bucket, seeds_of = [], {}, {}
    for s in per_seed:
        seed = s.get("seed")
        missing = _missing_from(s, rule, best)
        if missing:
            problems.append(missing)
            continue
        r, b = (s["modes"][m].get("slowdown_by_bucket") for m in (rule, best))
        if not isinstance(r, dict) or not isinstance(b, dict):
            problems.append(f"seed {seed}: no slowdown_by_bucket for "
                            f"{rule if not isinstance(r, dict) else best}")
            continue
        for bucket in sorted(set(r) | set(b)):
            if bucket not in r or bucket not in b:
                problems.append(f"bucket {bucket} in seed {seed} for "
                                f"{rule if bucket in r else best} only")
                continue
            try:
                value = _pct(_number(r[bucket], f"{rule} slowdown {bucket}"),
                             _number(b[bucket], f"{best} slowdown {bucket}"),
                             f"{best} slowdown {bucket}")
            except _NoFigure as err:
                problems.append(f"seed {seed}: {err}")
                continue
            per_bucket.setdefault(bucket, []).append(value)
            seeds_of.setdefault(bucket, []).append(seed)
    for bucket, seeds in sorted(seeds_of.items()):
        if len(seeds) < MIN_SEEDS_PER_BUCKET:
            problems.append(f"bucket {bucket} in {len(seeds)} seed(s) only ({_seeds(seeds)}; "
                            f"at least {MIN_SEEDS_PER_BUCKET} needed)")
    figures = {b: statistics.median(v) for b, v in per_bucket.items()
               if len(v) >= MIN_SEEDS_PER_BUCKET}
    detail = ", ".join(f"{b} {v:+.1f} % ({len(seeds_of[b])} seeds)"
                       for b, v in sorted(figures.items()))
    if problems or not figures:
        return None, problems or ["no size bucket"], detail
    return max(figures.values()), [], detail


def _seeds(seeds) -> str:
    return "seed " + ", ".join(str(s) for s in seeds) if len(seeds) == 1 else \
        "seeds " + ", ".join(str(s) for s in seeds)


def _every_mode(per_seed: list[dict], modes, figure) -> tuple[float | None, list[str], str]:
    """The worst mode's median over seeds of ``figure(mode, record)``: every mode in every
    seed, else None with what is missing."""
    values, problems = {}, []
    for mode in modes:
        got = []
        for s in per_seed:
            if mode not in s["modes"]:
                problems.append(f"{mode} missing from seed {s.get('seed')}")
                continue
            try:
                got.append(_number(figure(mode, s["modes"][mode]), f"{mode}'s figure"))
            except _NoFigure as err:
                problems.append(f"seed {s.get('seed')}: {err}")
        if got:
            values[mode] = statistics.median(got)
    if problems or not values:
        return None, problems or ["no mode"], ""
    worst = max(values, key=values.get)
    return values[worst], [], f"worst {worst}"


def _cpu_wait(mode: str, m: dict) -> float:
    return 100.0 * _get(m, mode, "cpu_wait_share")


def _prediction_error(mode: str, m: dict) -> float:
    return abs(_pct(_get(m, mode, "predicted_mean_jct_s"), _get(m, mode, "mean_jct_s"),
                    f"{mode} mean_jct_s"))


def _bottleneck(rule: str, best: str):
    def figure(a: dict, b: dict) -> float:
        base = _get(b, best, "bottleneck", "mean")
        if base <= 0:
            raise _NoFigure(f"{best} bottleneck.mean is {base!r}")
        return 100.0 * _get(a, rule, "bottleneck", "mean") / base
    return figure


def _judge(name: str, figure: tuple, bound: str, test, detail: str = "",
           signed: bool = True) -> Verdict:
    value, problems = figure[0], figure[1]
    if problems:
        judged_part = f"; judged: {detail}" if detail else ""
        return Verdict(name, None, bound, False, _problems_text(problems) + judged_part,
                       signed, judged=False)
    return Verdict(name, value, bound, test(value), detail, signed)


def _seed_check(per_seed: list[dict], registered) -> tuple[Verdict, str]:
    """Whether the figures hold every seed the run registered (and only those)."""
    name = "every registered seed in the figures"
    present = [s.get("seed") for s in per_seed]
    if registered is None:
        why = "the run's registered seeds are unknown (no summary with its seeds)"
        return Verdict(name, None, "seeds", False, why, judged=False), why
    registered = list(registered)
    problems = []
    missing = [s for s in registered if s not in present]
    if missing:
        problems.append(f"{_seeds(missing)} registered, not in the figures")
    extra = [s for s in present if s not in registered]
    if extra:
        problems.append(f"{_seeds(extra)} in the figures, not registered")
    twice = sorted({s for s in present if present.count(s) > 1})
    if twice:
        problems.append(f"{_seeds(twice)} twice in the figures")
    bound = _seeds(registered) if registered else "no seed registered"
    if problems or not registered:
        why = "; ".join(problems) or "no seed registered"
        return Verdict(name, None, bound, False, why, judged=False), why
    return Verdict(name, None, bound, True), ""


def verdicts(per_seed: list[dict], rule: str = DEFAULT_RULE, queue: str = RULE_QUEUE_DEFAULT,
             registered_seeds=None) -> tuple[dict, list[Verdict]]:
    """Which modes are compared, the rule's paired figure against every baseline, and each
    bound's verdict. ValueError when the run is not one the bounds are for (no ``off``, no
    baseline or not the judged mode in any seed)."""
    queue = queue_of(queue, rule)
    r = rule_mode(queue, rule)
    run_modes = list(dict.fromkeys(m for s in per_seed for m in s["modes"]))
    baselines = [b for b in bl.names() if b in run_modes]
    if "off" not in run_modes or not baselines or r not in run_modes:
        raise ValueError(f"the run needs 'off', a baseline and the rule {rule!r} on queue "
                         f"{queue!r} ({r}); it has {sorted(run_modes)}")
    against = against_every_baseline(per_seed, r, bl.names())
    best, best_problems = hardest_baseline(against)
    shown = best or "the hardest baseline"

    def vs_best(figure_of):
        return (None, best_problems) if best is None else _paired(per_seed, r, best,
                                                                   figure_of(best))

    bucket_value, bucket_problems, bucket_detail = (
        (None, best_problems, "") if best is None else _bucket_figure(per_seed, r, best))
    cpu = _every_mode(per_seed, run_modes, _cpu_wait)
    err = _every_mode(per_seed, run_modes, _prediction_error)
    missing = [f"{b} missing from {_seeds([s.get('seed') for s in per_seed if b not in s['modes']])}"
               for b in bl.names() if not all(b in s["modes"] for s in per_seed)]
    out = [
        Verdict("every baseline run in every seed", None, ", ".join(bl.names()), not missing,
                "; ".join(missing), judged=not missing),
        _judge("mean JCT vs off", _paired(per_seed, r, "off", _mean_change(r, "off")),
               f"bound <= {MEAN_JCT_VS_OFF_PCT:+g} %", lambda v: v <= MEAN_JCT_VS_OFF_PCT),
        _judge(f"mean JCT vs {shown}", vs_best(lambda b: _mean_change(r, b)),
               f"bound <= {MEAN_JCT_VS_BEST_PCT:+g} %", lambda v: v <= MEAN_JCT_VS_BEST_PCT),
        _judge(f"p95 JCT vs {shown}", vs_best(lambda b: lambda x, y: _pct(
            _get(x, r, "p95_jct_s"), _get(y, b, "p95_jct_s"), f"{b} p95_jct_s")),
            f"bound <= {P95_ABOVE_BEST_PCT:+g} %", lambda v: v <= P95_ABOVE_BEST_PCT),
        _judge(f"worst size bucket's slowdown vs {shown}", (bucket_value, bucket_problems),
               f"bound <= {SLOWDOWN_ABOVE_BEST_PCT:+g} %",
               lambda v: v <= SLOWDOWN_ABOVE_BEST_PCT, bucket_detail),
        _judge(f"bottleneck throughput, of {shown}'s", vs_best(lambda b: _bottleneck(r, b)),
               f"bound >= {BOTTLENECK_OF_BEST_PCT:g} %",
               lambda v: v >= BOTTLENECK_OF_BEST_PCT, signed=False),
        _judge("CPU wait, of mean JCT, every mode", cpu, f"bound < {100 * CPU_WAIT_SHARE:g} %",
               lambda v: v < 100 * CPU_WAIT_SHARE, cpu[2], signed=False),
        _judge("prediction error |predicted/measured - 1|, every mode", err,
               f"bound <= {PREDICTION_ERROR_PCT:g} %", lambda v: v <= PREDICTION_ERROR_PCT,
               err[2], signed=False),
    ]
    seed_verdict, seed_problem = _seed_check(per_seed, registered_seeds)
    if seed_problem:      # figures over other seeds than the registered ones judge nothing
        out = [Verdict(v.name, None, v.bound, False,
                       seed_problem + (f"; {v.detail}" if v.detail else ""), v.signed,
                       judged=False) for v in out]
    out.insert(1, seed_verdict)
    what = {"rule": r, "queue": queue, "best_baseline": best,
            "against": {b: v for b, (v, _) in against.items()},
            "seeds": [s.get("seed") for s in per_seed],
            "registered_seeds": None if registered_seeds is None else list(registered_seeds)}
    return what, out


@dataclass(frozen=True)
class Run:
    """A stored run: its per-seed records and its summary (None: none found)."""
    per_seed: list
    summary: dict | None
    where: Path


def load_run(path: Path) -> Run:
    """A run's per-seed records and summary, from its directory (``per_seed.json``,
    ``summary.json``), its summary (``X-summary.json`` beside ``X-per-seed.json``) or the
    per-seed file (``X-per-seed.json`` beside ``X-summary.json``). ValueError/OSError on
    a file that cannot be read."""
    path = Path(path)
    if path.is_dir():
        per, summary = path / "per_seed.json", path / "summary.json"
    elif path.name.endswith("summary.json"):
        summary = path
        beside = path.with_name(path.name[:-len("summary.json")] + "per-seed.json")
        per = beside if beside.exists() else path.with_name("per_seed.json")
    else:
        per = path
        if path.name.endswith("per-seed.json"):
            summary = path.with_name(path.name[:-len("per-seed.json")] + "summary.json")
        else:
            summary = path.with_name("summary.json")
    data = _read_json(per)
    if not isinstance(data, list) or not data or not all(
            isinstance(s, dict) and isinstance(s.get("modes"), dict) for s in data):
        raise ValueError(f"{per}: not a list of per-seed records with 'modes'")
    meta = _read_json(summary) if summary.exists() else None
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(f"{summary}: not a summary (a JSON object)")
    return Run(data, meta, per)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None


def registered_of(summary: dict | None) -> tuple[list | None, str]:
    """The seeds the run registered, and where that came from."""
    if summary is None:
        return None, "no summary"
    for key, source in (("registered_seeds", "the run's configuration"),
                        ("seeds", "the summary's seeds; it records no registered_seeds")):
        seeds = summary.get(key)
        if isinstance(seeds, list) and seeds:
            return seeds, source
    return None, "the summary records no seeds"


def queue_from(summary: dict | None, given: str | None) -> tuple[str, str]:
    """The queue the rule is judged on, and where it came from."""
    if given is not None:
        return given, "--queue"
    if summary is not None and summary.get("rule_queue"):
        return summary["rule_queue"], "the run's configuration (rule_queue)"
    return RULE_QUEUE_DEFAULT, "the default queue: the run registered none"


def rule_of(summary: dict | None) -> str:
    """The default rule the run was made with (its summary's ``default_rule``: a run made
    before the default changed is judged on its own rule); without one, today's."""
    rule = (summary or {}).get("default_rule")
    return rule if isinstance(rule, str) and rule in rank_rules.names() else DEFAULT_RULE


def report(per_seed: list[dict], queue: str = RULE_QUEUE_DEFAULT, registered_seeds=None,
           queue_source: str = "", seeds_source: str = "", rule: str = DEFAULT_RULE
           ) -> tuple[str, bool]:
    """The printed verdict, and whether every bound is met."""
    what, found = verdicts(per_seed, rule=rule, queue=queue, registered_seeds=registered_seeds)
    against = ", ".join(f"{b} {'n/a' if v is None else f'{v:+.1f} %'}"
                        for b, v in what["against"].items())
    lines = [f"the rule on queue {what['queue']}: {what['rule']}"
             + (f" ({queue_source})" if queue_source else ""),
             f"hardest baseline: {what['best_baseline'] or 'cannot judge'} (the rule's mean "
             f"JCT change, paired per seed, median: {against})",
             f"seeds {what['seeds']}; registered {what['registered_seeds']}"
             + (f" ({seeds_source})" if seeds_source else "")]
    lines += [v.line() for v in found]
    missed = [v for v in found if not v.met]
    unjudged = [v for v in found if not v.judged]
    lines.append("verdict: every bound met" if not missed else
                 f"verdict: {len(missed)} of {len(found)} bounds NOT met or not judged "
                 f"({len(missed) - len(unjudged)} NOT met, {len(unjudged)} cannot judge)")
    return "\n".join(lines), not missed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mininet_tests.check_bounds",
                                 description="The project's bounds on a heavy-tail run.")
    ap.add_argument("run", help="the run's directory, its summary.json or its per-seed file")
    ap.add_argument("--queue", default=None, metavar="Q",
                    help="judge the rule on queue Q (a queue or the rule's mode on it; "
                         "default: the run's rule_queue, else "
                         f"{RULE_QUEUE_DEFAULT!r})")
    args = ap.parse_args(argv)
    try:
        run = load_run(Path(args.run))
        queue, queue_source = queue_from(run.summary, args.queue)
        seeds, seeds_source = registered_of(run.summary)
        text, ok = report(run.per_seed, queue, seeds, queue_source, seeds_source,
                          rule_of(run.summary))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        print(f"check_bounds: {args.run}: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
