"""The CI-sized soak (bench/reliability/soak.py, short and light): nothing acknowledged is lost and
memory does not grow. Throughput and latency targets live in the benchmark itself
(bench/RESULTS.md), not in a timed test."""

import json
import subprocess
import sys

import pytest

from support.paths import REPO as ROOT


@pytest.mark.slow
def test_short_soak_loses_nothing(tmp_path):
    out = tmp_path / "soak.json"
    r = subprocess.run([sys.executable, "-m", "bench.reliability.soak", "--minutes", "0.5",
                        "--rate", "100", "--sub-rate", "10", "--jobs", "20", "--queued", "500",
                        "--ramp-rates", "--ramp-sub-rates", "--out", str(tmp_path / "work"),
                        "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(out.read_text())
    for key in ("reports_per_s", "p99_ms", "reports_lost", "rss_growth_pct_after_warmup"):
        assert key in result
    assert result["reports_lost"] == 0 and result["submissions_lost"] == 0, result
    assert result["controller"]["acked_batches_missing"] == 0
    assert result["reports_per_s"] > 0 and result["controller"]["windows"]
    assert result["rss_growth_pct_after_warmup"] < 25, result["controller"]["windows"]
    assert (tmp_path / "work" / "soak.png").stat().st_size > 0
