"""Batched polling and Slurm's accounting, against a fake Slurm client (no I/O): one
squeue per poll for every running job, none between polls (``poll_interval``), sacct
for the jobs squeue no longer shows, a purged job with no exit file never run twice;
``sacct`` output parsed."""

from __future__ import annotations


import pytest

from job_scheduler.core.decisions import StartDecision
from job_scheduler.service.slurm_executor import SlurmExecutor, SlurmJobOptions
from job_scheduler.service.store import JobRecord
from slurm_client import JobInfo, ParseError
from slurm_client.sacct import parse_sacct_lines, sacct_argv
from sluice_common.placement import Placement
from support.fake_slurm import SPEC, FakeSlurm
from topologies import load_topology


class CountingSlurm(FakeSlurm):
    def __init__(self):
        super().__init__()
        self.squeues: list[tuple[int, ...]] = []

    def jobs(self, ids=(), name=None):
        self.squeues.append(tuple(sorted(ids)))
        return super().jobs(ids, name)


def running_jobs(ex: SlurmExecutor, n: int) -> list[JobRecord]:
    out = []
    for k in range(1, n + 1):
        decision = StartDecision(k, Placement(str(k), ("h1",), ("h1",)))
        fields = ex.plan(JobRecord(k, 1, f"j{k}", SPEC, "queued", 0.0), decision, now=1.0)
        out.append(JobRecord(k, 1, f"j{k}", SPEC, "running", 0.0, executor="slurm",
                             placement=decision.placement_record(), started_at=1.0,
                             run_dir=fields["run_dir"], attempts=1, external_id=str(100 + k)))
    return out


@pytest.fixture
def five(tmp_path):
    fake = CountingSlurm()
    ex = SlurmExecutor(fake, load_topology("two-rack"), tmp_path,
                       SlurmJobOptions(batches=3, poll_interval=10.0))
    jobs = running_jobs(ex, 5)
    for j in jobs:
        fake.parts[int(j.external_id)] = [JobInfo(int(j.external_id), "RUNNING", nodes=("h1",))]
    return ex, fake, jobs


def test_one_squeue_per_poll_for_every_running_job_none_between(five):
    ex, fake, jobs = five
    ex.prepare_poll(jobs, 100.0)
    assert all(ex.poll(j, 100.0) is None for j in jobs)
    assert fake.squeues == [(101, 102, 103, 104, 105)]      # one command, five jobs
    for t in (101.0, 105.0, 109.9):                          # between polls: nothing
        ex.prepare_poll(jobs, t)
        assert all(ex.poll(j, t) is None for j in jobs)
    assert len(fake.squeues) == 1
    fake.parts[103] = [JobInfo(103, "FAILED", exit_code="1:0")]
    ex.prepare_poll(jobs, 110.0)                             # the next poll sees the end
    outcomes = {j.id: ex.poll(j, 110.0) for j in jobs}
    assert len(fake.squeues) == 2 and outcomes[3].state == "failed"
    assert [k for k, o in outcomes.items() if o is not None] == [3]


def test_a_purged_job_with_no_exit_file_is_judged_by_sacct_not_run_twice(five):
    ex, fake, jobs = five
    job = jobs[1]                                   # Slurm id 102: ended, then purged
    del fake.parts[102]
    fake.acct = [JobInfo(102, "COMPLETED", exit_code="0:0", user="sluice-alice",
                         account="physics")]
    ex.prepare_poll(jobs, 100.0)
    out = ex.poll(job, 100.0)
    assert out.state == "finished" and not out.never_started and "sacct" in out.reason
    assert fake.sacct_calls == 1                     # one sacct for the jobs squeue lacks
    # a purged job that failed: failed with Slurm's words, not re-queued as lost
    fake.acct = [JobInfo(102, "NODE_FAIL", exit_code="0:0")]
    ex.rounds.snapshot = None
    ex.prepare_poll(jobs, 200.0)
    out = ex.poll(job, 200.0)
    assert out.state == "failed" and not out.never_started and "NODE_FAIL" in out.reason
    # unknown to squeue AND sacct: Slurm never had it -> lost, re-queued after the grace
    fake.acct = []
    ex.rounds.snapshot = None
    ex.prepare_poll(jobs, 300.0)
    assert ex.poll(job, 300.0) is None
    ex.rounds.snapshot = None
    ex.prepare_poll(jobs, 300.0 + ex.lost_grace)
    assert ex.poll(job, 300.0 + ex.lost_grace).never_started


def test_unreachable_slurm_in_the_batch_leaves_every_job_running(five):
    ex, fake, jobs = five
    fake.down = True
    ex.prepare_poll(jobs, 100.0)
    assert all(ex.poll(j, 100.0) is None for j in jobs)


def test_without_prepare_poll_each_job_is_asked_alone(tmp_path):
    fake = CountingSlurm()
    ex = SlurmExecutor(fake, load_topology("two-rack"), tmp_path, SlurmJobOptions(batches=3))
    jobs = running_jobs(ex, 3)
    for j in jobs:
        ex.poll(j, 5.0)
    assert fake.squeues == [(101,), (102,), (103,)]


SACCT = """\
7|COMPLETED|0:0|h1|sluice-alice|physics|2026-11-28T09:00:01|sluice-x-job-1-attempt-1
8+0|CANCELLED by 0|0:15|h2|sluice-bob|chem|2026-11-28T09:00:02|het|name
8+1|FAILED|3:0|h[3-4]|sluice-bob|chem|2026-11-28T09:00:02|het|name
7|FAILED|1:0|h2|root|sluice|2026-11-27T09:00:00|older record of a reused id
"""


def test_sacct_lines_parsed_newest_record_per_id():
    jobs = {j.job_id: j for j in parse_sacct_lines(SACCT)}
    assert jobs[7].state == "COMPLETED" and jobs[7].user == "sluice-alice"
    assert jobs[7].account == "physics" and jobs[7].exit_code == "0:0"
    assert jobs[8].state == "CANCELLED" and jobs[8].leader == 8 and jobs[8].name == "het|name"
    assert jobs[9].leader == 8 and jobs[9].nodes == ("h3", "h4") and jobs[9].exit_code == "3:0"
    with pytest.raises(ParseError, match="bad job id"):
        parse_sacct_lines("x7|COMPLETED|0:0|h1|u|a|t|n\n")
    argv = sacct_argv([9, 7, 7])
    assert "--jobs=7,9" in argv and "--allusers" in argv and "--allocations" in argv
