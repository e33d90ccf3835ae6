"""`sluice run --policy las` for real on a small Mininet fabric (global fabric lock): more
demand than GPUs, a running job preempted through suspend/resume at a batch boundary,
every job finishes, the report lists the preemption. Needs root and Open vSwitch; fails
loudly otherwise (tests/conftest.py), never skipped."""

from __future__ import annotations

import json

import pytest
import yaml

from sluice.cli import main
from end_to_end.result import iterations_of

pytestmark = pytest.mark.fabric

TOPOLOGY = {
    "name": "las-mini", "emulation": {"bw_scale": 0.001},
    "switches": [{"name": "tor1", "role": "tor"}, {"name": "tor2", "role": "tor"},
                 {"name": "spine1", "role": "spine"}],
    "racks": [{"name": "rack1", "tor": "tor1"}, {"name": "rack2", "tor": "tor2"}],
    "hosts": [{"name": "h1", "rack": "rack1", "gpus": 2, "bw": 100000},
              {"name": "h2", "rack": "rack2", "gpus": 2, "bw": 100000}],
    "links": [{"a": "tor1", "b": "spine1", "bw": 50000}, {"a": "tor2", "b": "spine1", "bw": 50000}],
}
# 3 + 2 GPUs asked of 4: `wide` waits until `big` has attained the threshold's service.
JOBS = {"jobs": [
    {"name": "big", "model": "resnet18", "dataset_size": 32 * 3 * 200, "epochs": 1,
     "batch_size": 32, "max_gpus": 3, "arrival": 0},
    {"name": "wide", "model": "resnet18", "dataset_size": 32 * 2 * 60, "epochs": 1,
     "batch_size": 32, "max_gpus": 2, "arrival": 2},
]}


def test_las_run_preempts_at_a_batch_boundary_and_finishes_every_job(tmp_path, capsys):
    topo, jobs = tmp_path / "topo.yaml", tmp_path / "jobs.yaml"
    topo.write_text(yaml.safe_dump(TOPOLOGY))
    jobs.write_text(yaml.safe_dump(JOBS))
    out = tmp_path / "report"
    code = main(["run", str(jobs), "--topology", str(topo), "--policy", "las",
                 "--las-threshold", "6", "--compute", "emulated", "--out", str(out),
                 "--job-timeout", "240"])
    assert code == 0, capsys.readouterr().err[-3000:]
    result = json.loads((out / "report.json").read_text())
    by = {j["name"]: j for j in result["jobs"]}
    assert result["summary"]["finished"] == 2
    pre = result["preemptions"]
    assert pre and pre[0]["job"] == "big" and pre[0]["why"] == "las"
    assert result["summary"]["preemptions"] == len(pre)
    for p in pre:
        assert 0 < p["batch"] < p["batches"] and p["suspend_s"] > 0
    # every batch of every job ran exactly once per worker, across its segments
    for job in by.values():
        seen: dict[int, list[int]] = {}
        for it in iterations_of(job):
            seen.setdefault(it.worker, []).append(it.batch)
        assert seen == {w: list(range(1, job["batches"] + 1)) for w in range(job["gpus"])}
    assert by["big"]["preemptions"] >= 1
    report = (out / "report.md").read_text()
    assert "## Preemptions and migrations" in report and "| big | las |" in report
