"""The report of `sluice demo --executor slurm` (end_to_end/slurm_demo.py), from the
scheduler's job list and the files each job's processes wrote about themselves."""

from __future__ import annotations

import json

from end_to_end.slurm_demo import last_run_dir, report_markdown, slurm_report


def _ran_on(run_dir, name, host, role):
    d = run_dir / "ran_on"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.json").write_text(json.dumps({"hostname": host, "ip": "10.0.0.9",
                                                "slurm_node": host, "role": role,
                                                "slurm_job_id": "7"}))


def test_report_names_decided_and_reported_hosts(tmp_path):
    jobs = [
        {"id": 2, "name": "b", "state": "failed", "external_id": None, "placement": None,
         "reason": "sbatch: error: Invalid node name specified", "gpus": 2, "attempts": 1},
        {"id": 1, "name": "a", "state": "finished", "external_id": "7", "gpus": 3, "attempts": 2,
         "placement": {"ps_hosts": ["h3"], "worker_hosts": ["h1", "h1", "h3"]}},
    ]
    old, new = tmp_path / "job-1-attempt-1", tmp_path / "job-1-attempt-2"
    _ran_on(old, "worker0", "h4", "worker")          # the failed first attempt: not reported
    _ran_on(new, "server-1", "h3", "server")
    _ran_on(new, "worker0", "h1", "worker")
    _ran_on(new, "worker1", "h1", "worker")
    (new / "ran_on" / "worker2.json").write_text("{half a reco")   # torn write: skipped
    assert last_run_dir(tmp_path, 1) == new
    assert last_run_dir(tmp_path, 9) is None

    report = slurm_report(jobs, tmp_path, bringup_s=0.5)
    assert list(report["jobs"]) == ["a", "b"]
    a, b = report["jobs"]["a"], report["jobs"]["b"]
    assert (a["slurm_job_id"], a["decided_hosts"], a["ran_on"], a["state"]) == (
        7, ["h1", "h3"], ["h1", "h3"], "finished")
    assert [p["process"] for p in a["processes"]] == ["server-1", "worker0", "worker1"]
    assert (b["decided_hosts"], b["ran_on"], b["state"]) == ([], [], "failed")
    assert "Invalid node name" in b["reason"]
    assert report["bringup_s"] == 0.5
    table = report_markdown(report)
    assert "| a | 7 | finished | h1, h3 | h1, h3 | yes |" in table
    assert "| b | None | failed |  |  | NO |" in table
