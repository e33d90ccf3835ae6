"""``sluice demo --arms a,d`` end to end on the fabric, on a reduced workload (the first
three jobs of the seeded draw, 3 batches a worker): comparison.json has the shape
end_to_end.arms_report documents, every job of both arms finished, and each arm's figures
are its jobs'."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys

import pytest

from end_to_end.workload_draw import DEMO_SEED
from support.paths import REPO


@pytest.mark.fabric
def test_demo_two_arms_writes_the_comparison(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "sluice", "demo", "--arms", "a,d", "--jobs", "3",
                           "--batches", "3", "--out", str(out)], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "arm a (1/2)" in proc.stderr and "arm d (2/2)" in proc.stderr     # progress
    # every PS process came from a host's fork server (ps_runtime.zygote): none cold
    assert re.search(r"processes started warm \(\d+ forked at hand-over\), 0 cold",
                     proc.stderr), proc.stderr[-4000:]
    cmp = json.loads((out / "comparison.json").read_text())
    assert set(cmp["arms"]) == {"a", "d"} and cmp["seed"] == DEMO_SEED
    assert 0 < cmp["wall_time_s"] < 600
    for key, arm in cmp["arms"].items():
        assert len(arm["jobs"]) == 3 and arm["finished"] == 3, (key, arm)
        jcts = [j["jct_s"] for j in arm["jobs"].values()]
        assert all(j["jct_s"] > 0 and j["predicted_jct_s"] > 0 and j["racks"]
                   for j in arm["jobs"].values()), arm
        assert arm["avg_jct_s"] == pytest.approx(statistics.fmean(jcts), abs=1e-3)
        assert min(jcts) <= arm["p95_jct_s"] <= max(jcts)
        assert arm["makespan_s"] >= max(jcts)
    assert (out / "comparison.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "workload.yaml").is_file() and (out / "arm-a" / "report.json").is_file()
    # every worker had a GPU of its own, in both arms (the GPU indices the workers recorded)
    check = subprocess.run([sys.executable, "-m", "end_to_end.gpu_records",
                            str(out / "comparison.json")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert {e["pass"] for e in cmp["gpu_records"]} == {"arm-a", "arm-d"}
