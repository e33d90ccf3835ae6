"""`sluice demo --executor slurm` end to end (few batches per worker): every demo job is
one Slurm job, runs on exactly the hosts the scheduler decided (as its own processes
report), finishes, and nothing of Slurm, munge or the fabric is left afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mininet_fabric.slurm_cluster import HEAD_INTF

pytestmark = pytest.mark.fabric
from support.paths import REPO


def _cmdlines() -> list[str]:
    out = []
    for p in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            out.append(Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            pass
    return out


def test_demo_through_slurm(tmp_path):
    # its jobs run as sluice-alice: their run directories must be reachable by that user
    # (pytest's tmp tree is root's, 0700)
    shared = Path(tempfile.mkdtemp(prefix="sluice-demo-", dir="/tmp"))
    shared.chmod(0o755)
    out = shared / "demo"
    try:
        _demo_through_slurm(out)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _demo_through_slurm(out: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "sluice", "demo", "--executor", "slurm",
                        "--out", str(out), "--batches", "3"], cwd=REPO, capture_output=True,
                       text=True, timeout=540)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    report = json.loads((out / "slurm.json").read_text())
    assert 0 < report["bringup_s"] < 30
    jobs = report["jobs"]
    assert sorted(jobs) == ["goog-a", "goog-b", "goog-c", "goog-d", "res-e", "res-f"]
    for name, job in jobs.items():
        assert job["state"] == "finished", (name, job)
        assert isinstance(job["slurm_job_id"], int), (name, job)
        # as sacct recorded it: a non-root user the set-up creates, charged its account
        assert (job["user"], job["account"]) == ("sluice-alice", "physics"), (name, job)
        assert job["decided_hosts"] and job["ran_on"] == job["decided_hosts"], (name, job)
        roles = sorted(p["role"] for p in job["processes"])
        assert roles.count("worker") == job["gpus"] and "server" in roles, (name, roles)
        for p in job["processes"]:       # each process: in a host of the decision, at its IP
            assert p["slurm_node"] == p["hostname"] and p["ip"] == f"10.0.0.{p['hostname'][1:]}"
    assert len({j["slurm_job_id"] for j in jobs.values()}) == len(jobs)
    assert "| res-e |" in r.stdout
    left = [c for c in _cmdlines() if str(out) in c]
    assert left == []
    assert subprocess.run(["ip", "link", "show", HEAD_INTF], capture_output=True).returncode != 0
    assert (out / "slurm-logs" / "slurmctld.log").exists()
