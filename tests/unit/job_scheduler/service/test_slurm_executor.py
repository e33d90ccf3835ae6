"""The Slurm executor's bookkeeping against a fake Slurm client (no I/O): two-phase start,
adoption by job name after a crash, state from Slurm (never from srun), Slurm's reason
on failure, the batch script's exit status once Slurm forgot the job, Slurm down."""

import dataclasses
import json
from pathlib import Path

import pytest

from job_scheduler.core.decisions import StartDecision
from job_scheduler.service.slurm_executor import SlurmExecutor, SlurmJobOptions, slurm_job_name
from job_scheduler.service.store import JobRecord
from slurm_client import JobInfo, SlurmCommandError, SlurmUnavailable
from sluice_common.jobspec import parse_jobs_text
from sluice_common.placement import Placement
from topologies import load_topology

SPEC = parse_jobs_text("jobs:\n  - {name: j, model: resnet18, batch_size: 8, dataset_size: 64, "
                       "epochs: 1, max_gpus: 3}\n")[0]


class FakeSlurm:
    def __init__(self):
        self.submitted = []
        self.parts: dict[int, list[JobInfo]] = {}
        self.details: dict[int, list[JobInfo]] = {}
        self.cancelled = []
        self.down = False
        self.reject = None

    def _check(self):
        if self.down:
            raise SlurmUnavailable("squeue", "Unable to contact slurm controller")

    def submit(self, sub, env=None, unset=()):
        self._check()
        if self.reject:
            raise SlurmCommandError("sbatch", self.reject)
        self.submitted.append((sub, dict(env or {}), tuple(unset)))
        return 100 + len(self.submitted)

    def jobs(self, ids=(), name=None):
        self._check()
        out = [p for parts in self.parts.values() for p in parts]
        if name:
            return [p for p in out if p.name == name]
        return [p for p in out if p.leader in set(ids)]

    def job(self, job_id):
        self._check()
        return self.details.get(job_id, [])

    def cancel(self, job_id, signal=None):
        self.cancelled.append(job_id)


@pytest.fixture
def setup(tmp_path):
    topo = load_topology("two-rack")
    fake = FakeSlurm()
    ex = SlurmExecutor(fake, topo, tmp_path, SlurmJobOptions(batches=3), launch_grace=5,
                       tag="st0re")
    job = JobRecord(7, 1, "j", SPEC, "queued", 0.0)
    decision = StartDecision(7, Placement("7", ("h2",), ("h1", "h2", "h2")))
    fields = ex.plan(job, decision, now=10.0)
    running = JobRecord(7, 1, "j", SPEC, "running", 0.0, placement=decision.placement_record(),
                        executor="slurm", started_at=10.0, run_dir=fields["run_dir"], attempts=1)
    return ex, fake, running, tmp_path


def with_id(job, slurm_id):
    from dataclasses import replace
    return replace(job, slurm_job_id=slurm_id)


def test_launch_submits_one_component_per_host_and_no_admin_token(setup, monkeypatch):
    ex, fake, job, tmp = setup
    assert job.run_dir.endswith("job-7-attempt-1")
    out = ex.launch(job, {"SLUICE_CONTROLLER_JOB_TOKEN": "tok", "SLUICE_CONTROLLER_URL": "u"})
    assert out == {"slurm_job_id": 101}
    sub, env, unset = fake.submitted[0]
    assert sub.name == slurm_job_name(job, tag="st0re") == "sluice-st0re-job-7-attempt-1"
    assert [(c.node, c.gpus) for c in sub.components] == [("h2", 2), ("h1", 1)]
    assert env["SLUICE_CONTROLLER_JOB_TOKEN"] == "tok" and "SLUICE_SCHEDULER_TOKEN" in unset
    plan = json.loads((Path(job.run_dir) / "plan.json").read_text())
    # a start Slurm lost is re-queued without counting an attempt: a fresh run dir
    again = ex.plan(JobRecord(7, 1, "j", SPEC, "queued", 0.0), StartDecision(
        7, Placement("7", ("h1",), ("h1",))), now=20.0)
    assert again["run_dir"].endswith("job-7-attempt-1.2")
    assert plan["groups"] == {"h2": 0, "h1": 1} and plan["batches"] == 3
    assert plan["servers"] == [["h2", "10.0.0.2"]] and len(plan["workers"]) == 3
    assert "tok" not in (Path(job.run_dir) / "plan.json").read_text()   # never on disk


def test_sbatch_rejection_propagates_slurms_words(setup):
    ex, fake, job, _ = setup
    fake.reject = "sbatch: error: Batch job submission failed: Invalid node name specified"
    with pytest.raises(SlurmCommandError, match="Invalid node name specified"):
        ex.launch(job, {})


def test_poll_follows_slurm_state_not_srun(setup):
    ex, fake, job, _ = setup
    job = with_id(job, 101)
    fake.parts[101] = [JobInfo(101, "PENDING", name="sluice-st0re-job-7-attempt-1", het_job_id=101, het_offset=0)]
    assert ex.poll(job, 11.0) is None
    fake.parts[101] = [JobInfo(101, "RUNNING", het_job_id=101, het_offset=0, nodes=("h2",)),
                       JobInfo(102, "RUNNING", het_job_id=101, het_offset=1, nodes=("h1",))]
    assert ex.poll(job, 12.0) is None
    assert ex.own_running([job]) == {"h1": 1, "h2": 2}
    # a node failed under part 1: the job is cancelled, then reported with Slurm's reason
    fake.parts[101][1] = JobInfo(102, "NODE_FAIL", reason="NodeDown", het_job_id=101,
                                 het_offset=1, nodes=("h1",))
    assert ex.poll(job, 13.0) is None and fake.cancelled == [101]
    fake.parts[101][0] = JobInfo(101, "CANCELLED", het_job_id=101, het_offset=0)
    fake.details[101] = [JobInfo(102, "NODE_FAIL", reason="NodeDown", nodes=("h1",),
                                 exit_code="0:0", het_job_id=101, het_offset=1)]
    out = ex.poll(job, 14.0)
    assert out.state == "failed" and "NODE_FAIL, reason NodeDown, nodes h1" in out.reason
    assert "Slurm job 101" in out.reason


def test_completed_needs_the_batch_scripts_word(setup):
    ex, fake, job, _ = setup
    job = with_id(job, 101)
    run = Path(job.run_dir)
    run.mkdir(parents=True)
    fake.parts[101] = [JobInfo(101, "COMPLETED", het_job_id=101, het_offset=0)]
    (run / "exit_status").write_text("0\n")
    assert ex.poll(job, 20.0).state == "finished"
    # Slurm forgot the job (MinJobAge): the exit status decides
    fake.parts.clear()
    assert ex.poll(job, 21.0).state == "finished"
    # failed while Slurm does not know it (lost by a slurmctld restart): Slurm's loss
    (run / "exit_status").write_text("1\n")
    (run / "error").write_text("srun: error: Unable to confirm allocation for job 101\n")
    out = ex.poll(job, 22.0)
    assert out.never_started and "lost by Slurm" in out.reason
    assert "Unable to confirm allocation" in out.reason
    # a failure Slurm knows is the job's: Slurm's words and the batch script's
    fake.parts[101] = [JobInfo(101, "FAILED", reason="NonZeroExitCode")]
    (run / "error").write_text("worker(s) ended without their last batch (3): worker1 at 1\n")
    out = ex.poll(job, 22.5)
    assert out.state == "failed" and not out.never_started
    assert "NonZeroExitCode" in out.reason and "without their last batch" in out.reason
    fake.parts.clear()
    (run / "exit_status").unlink()
    # unknown to Slurm without a result (a slurmctld killed before it saved the job):
    # its processes may still run; after the grace the job is re-queued, not failed
    assert ex.poll(job, 23.0) is None
    assert ex.poll(job, 23.0 + ex.lost_grace - 1) is None
    out = ex.poll(job, 23.0 + ex.lost_grace)
    assert out.never_started and "lost by Slurm" in out.reason


def test_batch_script_result_wins_over_a_rerun_slurm_still_tracks(setup):
    ex, fake, job, _ = setup
    job = with_id(job, 101)
    run = Path(job.run_dir)
    run.mkdir(parents=True)
    (run / "batch.started").write_text("{}")
    fake.parts[101] = [JobInfo(101, "COMPLETED")]
    assert ex.poll(job, 5.0) is None            # completed, result being written
    fake.parts[101] = [JobInfo(101, "PENDING", reason="launch failed requeued held")]
    (run / "exit_status").write_text("0\n")
    assert ex.poll(job, 6.0) is None            # Slurm would re-run it: cancelled
    assert fake.cancelled == [101]
    fake.parts[101] = [JobInfo(101, "FAILED", reason="launch failed")]
    assert ex.poll(job, 7.0).state == "finished"


def test_crash_between_sbatch_and_store_adopts_by_name(setup):
    ex, fake, job, _ = setup
    assert job.slurm_job_id is None
    fake.parts[55] = [JobInfo(55, "RUNNING", name="sluice-other-job-7-attempt-1"),   # another store's
                      JobInfo(56, "RUNNING", name="sluice-st0re-job-7-attempt-1")]
    assert ex.learned(job) == {}
    assert ex.poll(job, 11.0) is None           # adopted, running
    assert ex._slurm_id(job) == 56
    # ... and handed to the service to record: the store then agrees with squeue
    assert ex.learned(job) == {"slurm_job_id": 56}
    assert ex.learned(dataclasses.replace(job, slurm_job_id=56)) == {}
    ex2 = SlurmExecutor(fake, ex.topology, ex.run_root, launch_grace=5, tag="st0re")
    fake.parts.clear()
    assert ex2.poll(job, 12.0) is None          # within the grace: sbatch may be on its way
    out = ex2.poll(job, 30.0)
    assert out.never_started and out.state == "failed"


def test_batch_started_file_names_the_slurm_job(setup):
    ex, fake, job, _ = setup
    run = Path(job.run_dir)
    run.mkdir(parents=True)
    (run / "batch.started").write_text(json.dumps({"slurm_job_id": "77"}))
    fake.parts[77] = [JobInfo(77, "RUNNING")]
    assert ex.poll(job, 100.0) is None and ex._slurm_id(job) == 77


def test_slurm_down_means_still_running_and_no_capacity(setup):
    ex, fake, job, _ = setup
    fake.down = True
    assert ex.poll(with_id(job, 101), 50.0) is None
    from job_scheduler.core.placement import ClusterState

    class Nodes(FakeSlurm):
        def nodes(self):
            raise SlurmUnavailable("sinfo --json", "Unable to contact slurm controller")
    ex.client = Nodes()
    state = ClusterState(ex.topology)
    ex.capacity(state, [])
    assert state.total_free == 0


def test_progress_relay_sends_each_workers_latest_batch_once(tmp_path):
    from job_scheduler.service.slurm_executor import ProgressRelay

    (tmp_path / "ps").mkdir()
    relay = ProgressRelay("http://127.0.0.1:9", "tok", "job-a", tmp_path, workers=2)
    sent = []

    class Fake:
        def progress(self, job, worker, batch, token):
            sent.append((job, worker, batch, token))
    relay.client = Fake()
    w0 = tmp_path / "ps" / "worker0.log"
    w0.write_text("worker 0 of job a: emulated\nbatch 1 loss 0 time_s 0.1\nbatch 2 loss 0 time_s 0.1\n")
    assert relay.step() == 1 and sent == [("job-a", "w0", 2, "tok")]
    assert relay.step() == 0                      # nothing new
    with open(w0, "a") as f:
        f.write("batch 3 loss 0 time_s 0.1\n")
    (tmp_path / "ps" / "worker1.log").write_text("batch 1 loss 0 time_s 0.1\n")
    relay.step()
    assert sent[1:] == [("job-a", "w0", 3, "tok"), ("job-a", "w1", 1, "tok")]
