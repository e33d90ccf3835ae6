"""Controller figures before and after a change, in one run: the sluice half of
bench_controller.py (reaction latency at 200 reports/s, flow-mod rate to barrier),
alternating between two source trees so that load drifts hit both alike.

    git archive <base-commit> | tar -x -C /tmp/base     # the code before the change
    sudo .venv/bin/python -m bench.controller.bench_controller_ab --base /tmp/base [--after DIR] [--pairs 3]

The controller process of each round runs from --base or from this checkout (through
PYTHONPATH; same venv). Prints each round, then medians per tree and the ratios.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
from pathlib import Path

from bench import harness
from bench.harness import ROOT

from bench.controller import bench_controller


def one_round(tree: Path, cfg: bench_controller.LoadConfig) -> dict:
    os.environ["PYTHONPATH"] = str(tree)        # inherited by the controller process
    try:
        return bench_controller.bench_sluice(cfg)
    finally:
        os.environ.pop("PYTHONPATH", None)


@dataclasses.dataclass(frozen=True)
class ABConfig:
    trees: dict[str, Path]              # "before" / "after" -> source tree
    pairs: int
    json: str | None
    load: bench_controller.LoadConfig


def parse(argv: list[str] | None = None) -> ABConfig:
    """The command line: the two trees, the pairs, and bench_controller's own load options."""
    ap = harness.parser(__doc__)
    ap.add_argument("--base", type=Path, required=True, help="source tree before the change")
    ap.add_argument("--after", type=Path, default=ROOT,
                    help="source tree after the change (default: this checkout)")
    ap.add_argument("--pairs", type=int, default=3)
    bench_controller.add_load_arguments(ap)
    args = ap.parse_args(argv)
    load = bench_controller.LoadConfig(**{f.name: getattr(args, f.name) for f in
                                          dataclasses.fields(bench_controller.LoadConfig)})
    return ABConfig({"before": args.base.resolve(), "after": args.after.resolve()},
                    args.pairs, args.json, load)


def main(argv: list[str] | None = None) -> int:
    ab = parse(argv)
    trees, cfg = ab.trees, ab.load
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for i in range(ab.pairs):
        for name, tree in trees.items():
            result = one_round(tree, cfg)
            runs[name].append(result)
            print(f"pair {i + 1} {name:<6} load {os.getloadavg()[0]:5.1f}: reaction median "
                  f"{result['reaction']['median_ms']} ms p99 {result['reaction']['p99_ms']} ms; "
                  f"flow mods add {result['throughput']['add_per_s']}/s delete "
                  f"{result['throughput']['delete_per_s']}/s", flush=True)
    med = {name: {"median_ms": statistics.median(r["reaction"]["median_ms"] for r in rs),
                  "add_per_s": statistics.median(r["throughput"]["add_per_s"] for r in rs),
                  "delete_per_s": statistics.median(r["throughput"]["delete_per_s"] for r in rs)}
           for name, rs in runs.items()}
    b, a = med["before"], med["after"]
    print(f"medians of {ab.pairs}: reaction median before {b['median_ms']} ms, after "
          f"{a['median_ms']} ms (after/before {a['median_ms'] / b['median_ms']:.2f}); flow-mod "
          f"add before {b['add_per_s']}/s, after {a['add_per_s']}/s (after/before "
          f"{a['add_per_s'] / b['add_per_s']:.2f}); delete before {b['delete_per_s']}/s, after "
          f"{a['delete_per_s']}/s ({a['delete_per_s'] / b['delete_per_s']:.2f})")
    harness.write_json(ab.json, {"runs": runs, "medians": med})
    return 0


if __name__ == "__main__":
    sys.exit(main())
