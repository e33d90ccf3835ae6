"""The Slurm executor's bookkeeping against a fake Slurm client (no I/O): two-phase start,
adoption by job name after a crash, state from Slurm (never from srun), Slurm's reason
on failure, the batch script's exit status once Slurm forgot the job, Slurm down."""

import dataclasses
import json
from pathlib import Path

import pytest

from job_scheduler.core.decisions import StartDecision
from job_scheduler.service.slurm_executor import SlurmExecutor, SlurmJobOptions
from job_scheduler.service.slurm_names import slurm_job_name
from job_scheduler.service.store import JobRecord
from slurm_client import JobInfo, SlurmCommandError, SlurmUnavailable
from sluice_common.placement import Placement
from topologies import load_topology
from support.fake_slurm import FakeSlurm, SPEC


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
    return replace(job, external_id=None if slurm_id is None else str(slurm_id))


def test_launch_submits_one_component_per_host_and_no_admin_token(setup, monkeypatch):
    ex, fake, job, tmp = setup
    assert job.run_dir.endswith("job-7-attempt-1")
    out = ex.launch(job, {"SLUICE_CONTROLLER_JOB_TOKEN": "tok", "SLUICE_CONTROLLER_URL": "u"})
    assert out == {"external_id": "101"}
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
    assert job.external_id is None
    fake.parts[55] = [JobInfo(55, "RUNNING", name="sluice-other-job-7-attempt-1"),   # another store's
                      JobInfo(56, "RUNNING", name="sluice-st0re-job-7-attempt-1")]
    assert ex.learned(job) == {}
    assert ex.poll(job, 11.0) is None           # adopted, running
    assert ex._slurm_id(job) == 56
    # ... and handed to the service to record: the store then agrees with squeue
    assert ex.learned(job) == {"external_id": "56"}
    assert ex.learned(dataclasses.replace(job, external_id="56")) == {}
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
    from job_scheduler.core.cluster_state import ClusterState

    class Nodes(FakeSlurm):
        def nodes(self):
            raise SlurmUnavailable("sinfo --json", "Unable to contact slurm controller")
    ex.client = Nodes()
    state = ClusterState(ex.topology)
    ex.capacity(state, [])
    assert state.total_free == 0


# ---- suspend and resume ------------------------------------------------------------------

def _suspended_by_batch_script(run_dir: Path, batch: int = 4, batches: int = 10) -> None:
    """What ps_runtime.slurm_job leaves after a checkpointed stop."""
    from ps_runtime import checkpoint
    ckpt = run_dir / "ps" / "checkpoint"
    checkpoint.write_manifest(ckpt, checkpoint.Manifest("j", "resnet18", "emulated", batch,
                                                        batches, 3, 1.0))
    (run_dir / "suspended.json").write_text(json.dumps(
        {"checkpoint": str(ckpt), "batch": batch, "batches": batches}))
    (run_dir / "exit_status").write_text("0\n")


def test_every_job_carries_slurms_checkpoint_warning(setup):
    ex, fake, job, _ = setup
    ex.launch(job, {})
    sub, _, _ = fake.submitted[0]
    assert sub.extra == ("--signal=B:USR1@120",)
    from slurm_client.parse import sbatch_argv
    argv = sbatch_argv(sub)
    assert argv.index("--signal=B:USR1@120") < argv.index("--nodelist=h2")   # the whole job


def test_a_usr1_suspend_is_reported_suspended_and_the_allocation_released(setup):
    ex, fake, job, _ = setup
    job = with_id(job, 101)
    fake.parts[101] = [JobInfo(101, "RUNNING", het_job_id=101, het_offset=0, nodes=("h2",))]
    _suspended_by_batch_script(Path(job.run_dir))
    out = ex.poll(job, 20.0)
    assert out.state == "suspended" and fake.cancelled == [101]
    assert out.resume == {"checkpoint": str(Path(job.run_dir) / "ps" / "checkpoint"),
                          "batch": 4, "batches": 10, "work_left": 0.6}


def test_suspend_waits_for_the_checkpoint_then_cancels_and_a_resume_names_it(setup):
    import threading
    ex, fake, job, tmp = setup
    ex.launch(job, {})
    job = with_id(job, 101)
    run_dir = Path(job.run_dir)
    request = run_dir / "ps" / "checkpoint" / "SUSPEND"

    def batch_script():          # sees the request, checkpoints, exits
        while not request.exists():
            pass
        assert fake.cancelled == []          # nothing cancelled before the checkpoint
        _suspended_by_batch_script(run_dir)
    worker = threading.Thread(target=batch_script)
    worker.start()
    got = ex.suspend(job, 30.0)
    worker.join()
    assert fake.cancelled == [101] and got["work_left"] == 0.6 and got["suspend_s"] >= 0
    # the resume: a run directory of its own, a plan that continues the checkpoint, on
    # 2 workers instead of 3: the 6 batches left of 3 workers spread over 2 (9 more)
    resume = {"checkpoint": got["checkpoint"], "suspends": 1, "work_left": 0.6}
    queued = dataclasses.replace(job, state="queued", resume=resume, external_id=None,
                                 attempts=0)
    fields = ex.plan(queued, StartDecision(7, Placement("7", ("h3",), ("h3", "h4"))), now=40.0)
    assert fields["run_dir"].endswith("job-7-attempt-1-resume-1")
    ex.launch(dataclasses.replace(queued, state="running", run_dir=fields["run_dir"]), {})
    plan = json.loads((Path(fields["run_dir"]) / "plan.json").read_text())
    assert plan["resume_from"] == got["checkpoint"] and plan["batches"] == 4 + 9


def test_slurms_gpus_of_a_jobs_old_slurm_job_never_overwrite_its_new_record(setup):
    """A migration suspends a job and submits it again as a new Slurm job on other GPUs
    in one slot; the GPU indices Slurm gave the old Slurm job, read at the start of that
    slot, must not be written over the new record (they did, and every later slot failed
    on a record of 2 workers with 1 index)."""
    from job_scheduler.core.cluster_state import ClusterState
    from job_scheduler.service.gpu_records import recorded_placement
    from slurm_client.nodes import NodeInfo

    def slot(running):                  # what the service does before the policy decides
        state = ClusterState(ex.topology)
        for j in running:
            state.allocate(*recorded_placement(j))
        ex.capacity(state, running)

    ex, fake, job, _ = setup
    one = {"ps_hosts": ["h1"], "worker_hosts": ["h1"], "gpus_by_host": {"h1": 1},
           "gpu_ids": {"h1": [1]}}
    old = dataclasses.replace(job, placement=one, external_id="4")
    fake.node_list = [NodeInfo(h, h, h, "MIXED", gpus=4) for h in ("h1", "h2", "h3", "h4")]
    fake.gpu_indices = {4: {"h1": [2]}}           # Slurm gave it another index: it wins
    slot([old])
    assert ex.learned(old)["placement"]["gpu_ids"] == {"h1": [2]}
    two = {**one, "worker_hosts": ["h1", "h1"], "gpus_by_host": {"h1": 2},
           "gpu_ids": {"h1": [0, 1]}}
    migrated = dataclasses.replace(job, placement=two, external_id="5")
    assert "placement" not in ex.learned(migrated)   # Slurm job 4's GPUs, not 5's
