"""One small `sluice run` for real: controller process, Mininet two-rack fabric (global
fabric lock), two tiny PS jobs, priority on. Needs root and Open vSwitch; fails loudly
otherwise (tests/conftest.py), never skipped."""

from __future__ import annotations

import json

import pytest

from sluice.cli import main
from end_to_end.result import iterations_of

pytestmark = pytest.mark.fabric

# fifo + first fit: tiny-a takes 3 GPUs of h1, tiny-b gets h1's last GPU and one of h2,
# so tiny-b's push/pull crosses the fabric and the controller has flows to classify. Both
# arrive at once (one decision): tiny-a's five batches take under a second, so a later
# tiny-b could find h1 free again.
JOBS = """jobs:
  - {name: tiny-a, model: smallcnn, dataset_size: 480, epochs: 1, batch_size: 32, max_gpus: 3, arrival: 0}
  - {name: tiny-b, model: smallcnn, dataset_size: 320, epochs: 1, batch_size: 32, max_gpus: 2, arrival: 0}
"""


def test_sluice_run_two_tiny_jobs_with_priority(tmp_path, capsys, monkeypatch):
    # One path for progress: the workers report it themselves, over the fabric's
    # management network; nothing in this process (the run loop) reports any.
    from controller.client import ControllerClient

    reported_here = []
    monkeypatch.setattr(ControllerClient, "progress",
                        lambda self, *a, **k: reported_here.append(a) or {})
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(JOBS)
    out = tmp_path / "report"
    code = main(["run", str(jobs), "--topology", "two-rack", "--policy", "fifo",
                 "--priority", "on", "--out", str(out), "--job-timeout", "240"])
    assert code == 0, capsys.readouterr().err[-3000:]
    for name in ("report.md", "report.json", "turnaround.png", "iterations.png", "bottleneck.png"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "controller.log").exists()
    result = json.loads((out / "report.json").read_text())
    jobs_by_name = {j["name"]: j for j in result["jobs"]}
    assert set(jobs_by_name) == {"tiny-a", "tiny-b"}
    for job in jobs_by_name.values():
        assert job["status"] == "finished", job.get("error")
        assert job["turnaround"] >= job["wait"] >= 0
        workers = {it.worker for it in iterations_of(job)}
        assert workers == set(range(job["gpus"]))
        assert len(iterations_of(job)) == job["gpus"] * job["batches"]
        # the controller saw the job: registered, and every worker's own last report
        # (what the controller holds for it at the job's end) names the job's last batch
        assert job["controller"]["reported_batch"] == {str(w): job["batches"]
                                                       for w in range(job["gpus"])}
    assert jobs_by_name["tiny-a"]["batches"] == 5 and jobs_by_name["tiny-b"]["batches"] == 5
    # tiny-b spans h1 and h2: the controller classified its push and pull flows
    assert jobs_by_name["tiny-b"]["worker_hosts"] == ["h1", "h2"]
    assert jobs_by_name["tiny-b"]["controller"]["flows"] >= 2
    assert len(result["decisions"]) == 2
    assert result["links"], "no link statistics were sampled"
    assert result["summary"]["finished"] == 2
    assert reported_here == [], "the run loop reported progress itself"
    assert result["compute"] in ("emulated", "torch") and result["profile"].endswith(".yaml")
