"""bench/controller/bench_controller_ab.py builds the same load as bench_controller.py
(it once passed its own namespace where bench_sluice wanted a LoadConfig, and broke
when LoadConfig gained a field)."""

from __future__ import annotations

from pathlib import Path

from bench.controller import bench_controller, bench_controller_ab


def test_ab_parses_every_load_option_into_bench_controllers_config():
    ab = bench_controller_ab.parse(["--base", "/tmp/base", "--pairs", "2", "--reports", "50",
                                    "--rate", "100", "--rank", "remaining"])
    assert isinstance(ab.load, bench_controller.LoadConfig)
    assert (ab.load.reports, ab.load.rate, ab.load.rank) == (50, 100.0, "remaining")
    assert ab.trees["before"] == Path("/tmp/base").resolve() and ab.pairs == 2
    # the defaults are bench_controller's own
    plain = bench_controller_ab.parse(["--base", "/tmp/base"]).load
    assert plain == bench_controller.LoadConfig()
