"""The verdict on the heavy-tail experiment's bounds, from its per-seed figures.

    .venv/bin/python -m mininet_tests.check_bounds RUN_DIR | SUMMARY.json | PER_SEED.json

prints one line per bound (value, bound, met or NOT met) and a last line with the count;
exit status 0 when every bound is met, 1 when one is not, 2 when the input cannot be read.

The bounds are issue 47's, fixed here before any verdict run and never moved by a model:
the default ranking rule, on the switch queue where it does best (the deep FIFO, or one of
the baselines' queues: ``remaining``, ``remaining+off-fair``, ...), against ``off`` and
against the best baseline (the baseline mode with the lowest mean JCT, median over seeds):

- mean JCT at least 30 % below ``off`` and 20 % below the best baseline;
- p95 JCT at most 10 % above the best baseline's;
- no size bucket's mean slowdown more than 10 % above the best baseline's;
- bottleneck throughput at least 95 % of the best baseline's;
- CPU wait under 10 % of every mode's mean JCT;
- every mode's predicted mean JCT (computed before the run) within 15 % of measured.

Every comparison is paired per seed (this mode against the other in the same seed), and the
median over seeds is the figure judged. A figure that cannot be computed (a mode missing,
a prediction absent) is NOT met: the checker fails closed.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from mininet_fabric import baselines as bl
from sluice_common.rank_rules import DEFAULT_RULE

MEAN_JCT_VS_OFF_PCT = -30.0
MEAN_JCT_VS_BEST_PCT = -20.0
P95_ABOVE_BEST_PCT = 10.0
SLOWDOWN_ABOVE_BEST_PCT = 10.0
BOTTLENECK_OF_BEST_PCT = 95.0
CPU_WAIT_SHARE = 0.10
PREDICTION_ERROR_PCT = 15.0


@dataclass(frozen=True)
class Verdict:
    name: str
    value: float | None      # the judged figure (None: it could not be computed)
    bound: str               # the bound, as printed
    met: bool
    detail: str = ""
    signed: bool = True      # a change (+/-) rather than a level

    def line(self) -> str:
        value = ("n/a" if self.value is None else
                 f"{self.value:+.1f} %" if self.signed else f"{self.value:.1f} %")
        word = "met" if self.met else "NOT met"
        extra = f" [{self.detail}]" if self.detail else ""
        shown = "" if self.value is None and self.met else f"{value} "
        return f"{self.name}: {shown}({self.bound}): {word}{extra}"


def rule_mode(baseline: str, rule: str = DEFAULT_RULE) -> str:
    """The mode that runs ``rule`` on ``baseline``'s queues (the deep FIFO's is the rule's)."""
    return rule if baseline == "off" else f"{rule}+{baseline}"


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _pct(a, b) -> float | None:
    return None if a is None or not b else 100.0 * (a / b - 1.0)


def _paired(per_seed: list[dict], mode: str, other: str, figure) -> float | None:
    """Median over seeds of ``figure(mode's record, other's record)``."""
    return _median(figure(s["modes"][mode], s["modes"][other]) for s in per_seed
                   if mode in s["modes"] and other in s["modes"])


def _median_of(per_seed: list[dict], mode: str, key: str) -> float | None:
    return _median(s["modes"][mode].get(key) for s in per_seed if mode in s["modes"])


def best_of(per_seed: list[dict], modes) -> str | None:
    """The mode among ``modes`` with the lowest mean JCT (median over seeds)."""
    present = [(m, _median_of(per_seed, m, "mean_jct_s")) for m in modes]
    present = [(m, v) for m, v in present if v is not None]
    return min(present, key=lambda mv: mv[1])[0] if present else None


def _at_most(name, value, bound, detail="") -> Verdict:
    return Verdict(name, value, f"bound <= {bound:+g} %", value is not None and value <= bound,
                   detail)


def _bottleneck(rule: dict, base: dict) -> float | None:
    a, b = (rule.get("bottleneck") or {}).get("mean"), (base.get("bottleneck") or {}).get("mean")
    return None if a is None or not b else 100.0 * a / b


def _worst_bucket(per_seed: list[dict], rule: str, best: str) -> tuple[float | None, str]:
    buckets = sorted({b for s in per_seed for m in (rule, best) if m in s["modes"]
                      for b in s["modes"][m].get("slowdown_by_bucket", {})})
    figures = {b: _paired(per_seed, rule, best, lambda r, x, b=b: _pct(
        r.get("slowdown_by_bucket", {}).get(b), x.get("slowdown_by_bucket", {}).get(b)))
        for b in buckets}
    if not figures or any(v is None for v in figures.values()):
        return None, "a bucket without figures"
    worst = max(figures, key=figures.get)
    return figures[worst], ", ".join(f"{b} {v:+.1f} %" for b, v in figures.items())


def _every_mode(per_seed: list[dict], figure) -> tuple[float | None, str]:
    """The worst mode's median of ``figure(record)``; None when a mode lacks it."""
    modes = [m for m in per_seed[0]["modes"]]
    values = {m: _median(figure(s["modes"][m]) for s in per_seed if m in s["modes"])
              for m in modes}
    if not values or any(v is None for v in values.values()):
        missing = [m for m, v in values.items() if v is None]
        return None, f"no figure for {', '.join(missing) or 'any mode'}"
    worst = max(values, key=values.get)
    return values[worst], f"worst {worst}"


def verdicts(per_seed: list[dict], rule: str = DEFAULT_RULE) -> tuple[dict, list[Verdict]]:
    """Which modes are compared, and each bound's verdict."""
    baselines = [b for b in bl.names() if any(b in s["modes"] for s in per_seed)]
    best = best_of(per_seed, baselines)
    # the rule runs on queues (not on pias, which tags at the hosts)
    on_best_queue = best_of(per_seed, [rule_mode(b, rule) for b in baselines
                                       if b in bl.queues()])
    if best is None or on_best_queue is None or "off" not in per_seed[0]["modes"]:
        raise ValueError(f"the run needs 'off', a baseline and the rule {rule!r} on one of "
                         f"its queues; it has {sorted(per_seed[0]['modes'])}")
    r = on_best_queue

    def mean(a, b):
        return _pct(a.get("mean_jct_s"), b.get("mean_jct_s"))

    worst, buckets = _worst_bucket(per_seed, r, best)
    cpu, cpu_detail = _every_mode(per_seed, lambda m: (
        None if m.get("cpu_wait_share") is None else 100.0 * m["cpu_wait_share"]))
    err, err_detail = _every_mode(per_seed, lambda m: (
        None if not m.get("predicted_mean_jct_s") else abs(_pct(m["predicted_mean_jct_s"],
                                                               m["mean_jct_s"]))))
    bottleneck = _paired(per_seed, r, best, _bottleneck)
    out = [
        _at_most("mean JCT vs off", _paired(per_seed, r, "off", mean), MEAN_JCT_VS_OFF_PCT),
        _at_most(f"mean JCT vs {best}", _paired(per_seed, r, best, mean), MEAN_JCT_VS_BEST_PCT),
        _at_most(f"p95 JCT vs {best}", _paired(per_seed, r, best, lambda a, b: _pct(
            a.get("p95_jct_s"), b.get("p95_jct_s"))), P95_ABOVE_BEST_PCT),
        _at_most(f"worst size bucket's slowdown vs {best}", worst, SLOWDOWN_ABOVE_BEST_PCT,
                 buckets),
        Verdict(f"bottleneck throughput, of {best}'s", bottleneck,
                f"bound >= {BOTTLENECK_OF_BEST_PCT:g} %",
                bottleneck is not None and bottleneck >= BOTTLENECK_OF_BEST_PCT, signed=False),
        Verdict("CPU wait, of mean JCT, every mode", cpu, f"bound < {100 * CPU_WAIT_SHARE:g} %",
                cpu is not None and cpu < 100 * CPU_WAIT_SHARE, cpu_detail, signed=False),
        Verdict("prediction error |predicted/measured - 1|, every mode", err,
                f"bound <= {PREDICTION_ERROR_PCT:g} %",
                err is not None and err <= PREDICTION_ERROR_PCT, err_detail, signed=False),
    ]
    # the best baseline is the best of them all: a run that left one out has no verdict
    missing = [b for b in bl.names() if not all(b in s["modes"] for s in per_seed)]
    out.insert(0, Verdict("every baseline run in every seed", None, ", ".join(bl.names()),
                          not missing, f"missing {', '.join(missing)}" if missing else ""))
    seeds = [s.get("seed") for s in per_seed]
    return {"rule": r, "best_baseline": best, "seeds": seeds}, out


def load_per_seed(path: Path) -> list[dict]:
    """The per-seed records of a run: its directory, its summary.json (per_seed.json is
    beside it) or the per-seed file itself (``*per_seed.json``, ``*-per-seed.json``)."""
    if path.is_dir():
        path = path / "per_seed.json"
    elif path.name.endswith("summary.json"):
        beside = path.with_name(path.name[:-len("summary.json")] + "per-seed.json")
        path = beside if beside.exists() else path.with_name("per_seed.json")
    data = json.loads(path.read_text())
    if not isinstance(data, list) or not data or not all("modes" in s for s in data):
        raise ValueError(f"{path}: not a list of per-seed records with 'modes'")
    return data


def report(per_seed: list[dict]) -> tuple[str, bool]:
    """The printed verdict, and whether every bound is met."""
    what, found = verdicts(per_seed)
    missed = [v for v in found if not v.met]
    lines = [f"the rule on its best queue: {what['rule']}; best baseline: "
             f"{what['best_baseline']}; seeds {what['seeds']} (paired medians over seeds)"]
    lines += [v.line() for v in found]
    lines.append("verdict: every bound met" if not missed else
                 f"verdict: {len(missed)} of {len(found)} bounds NOT met")
    return "\n".join(lines), not missed


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        text, ok = report(load_per_seed(Path(argv[0])))
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"check_bounds: {argv[0]}: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
