"""bench/controller/bench_controller_ab.py builds the same load as bench_controller.py
(it once passed its own namespace where bench_sluice wanted a LoadConfig, and broke
when LoadConfig gained a field)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bench.controller import bench_controller, bench_controller_ab


def test_ab_parses_every_load_option_into_bench_controllers_config():
    args, cfg = bench_controller_ab.parse(["--base", "/tmp/base", "--pairs", "2",
                                           "--reports", "50", "--rate", "100",
                                           "--rank", "remaining"])
    assert isinstance(cfg, bench_controller.LoadConfig)
    assert (cfg.reports, cfg.rate, cfg.rank) == (50, 100.0, "remaining")
    assert args.base == Path("/tmp/base") and args.pairs == 2
    # every field of the load is an option of the A/B bench too
    assert {f.name for f in dataclasses.fields(cfg)} <= set(vars(args))
