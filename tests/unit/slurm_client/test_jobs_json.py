"""``squeue --json`` of every supported release (tests/data/slurm/versions/squeue-*.json,
written from each release's job record definition, README.md there): the same jobs in
every layout. No Slurm is needed here."""

import json

import pytest

from slurm_client.jobs_json import parse_squeue_json
from slurm_client.nodes import ParseError
from slurm_client.parse import job_outcome
from slurm_client.versions import UnsupportedSlurm
from support.paths import TEST_DATA

DATA = TEST_DATA / "slurm" / "versions"


@pytest.mark.parametrize("release", ["22.05", "23.02", "23.11", "24.05", "24.11"])
def test_every_layout_gives_the_same_jobs(release):
    jobs = {j.job_id: j for j in parse_squeue_json((DATA / f"squeue-{release}.json").read_text())}
    assert set(jobs) == {9, 10, 12, 13}
    lead, part = jobs[9], jobs[10]
    assert (lead.het_job_id, lead.het_offset, part.het_job_id, part.het_offset) == (9, 0, 9, 1)
    assert lead.name == "sluice-st0re-job-9-attempt-1" and part.nodes == ("h2",)
    assert job_outcome([lead, part]) == ("active", "RUNNING")
    failed = jobs[12]
    assert (failed.state, failed.reason, failed.exit_code, failed.het_job_id) == \
        ("FAILED", "NonZeroExitCode", "3:0", None)
    assert (jobs[13].state, jobs[13].reason, jobs[13].nodes) == ("PENDING", "Resources", ())
    assert all(j.user == "root" for j in jobs.values())


def test_unknown_release_and_garbage():
    doc = json.loads((DATA / "squeue-24.11.json").read_text())
    doc["meta"]["slurm"]["version"] = {"major": "25", "minor": "05", "micro": "3"}
    with pytest.raises(UnsupportedSlurm, match="25.05.3"):
        parse_squeue_json(json.dumps(doc))
    del doc["jobs"]
    doc["meta"]["slurm"]["version"]["minor"] = "11"
    doc["meta"]["slurm"]["version"]["major"] = "24"
    with pytest.raises(ParseError, match="no 'jobs' list"):
        parse_squeue_json(json.dumps(doc))
    with pytest.raises(ParseError):
        parse_squeue_json("squeue: error: Unable to contact slurm controller")
