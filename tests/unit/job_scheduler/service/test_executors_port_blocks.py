"""The local executor's PS port blocks: one per running job on this machine, whatever the
jobs' names, passed to the job (``--base-port``, env SLUICE_BASE_PORT), freed when the job
ends, and learned back by a restarted service from the run directory."""

from __future__ import annotations

import time
from pathlib import Path

from job_scheduler.core.decisions import StartDecision
from job_scheduler.service.executors import LocalExecutor, template_command, train_command
from job_scheduler.service.store import JobRecord
from ps_runtime.plan import BLOCK, EPHEMERAL_LOW, PORT_LOW, default_base_port
from sluice_common.jobspec import parse_jobs_text
from sluice_common.placement import Placement

SPEC = parse_jobs_text("jobs:\n  - {name: same, model: resnet18, batch_size: 8, "
                       "dataset_size: 64, epochs: 1, max_gpus: 1}\n")[0]


def start(ex: LocalExecutor, job_id: int) -> JobRecord:
    job = JobRecord(job_id, 1, "same", SPEC, "queued", 0.0)
    fields = ex.plan(job, StartDecision(job_id, Placement(str(job_id), ("h1",), ("h1",))), 1.0)
    job = JobRecord(job_id, 1, "same", SPEC, "running", 0.0, executor="local", started_at=1.0,
                    **{k: v for k, v in fields.items() if k in ("run_dir",)})
    return JobRecord(**{**job.__dict__, **ex.launch(job, {})})


def wait_outcome(ex, job):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        out = ex.poll(job, time.time())
        if out is not None:
            return out
        time.sleep(0.05)
    raise AssertionError("the job did not end")


def test_two_jobs_of_one_name_get_two_blocks_and_ended_ones_are_freed(tmp_path):
    ex = LocalExecutor(tmp_path / "runs", template_command(
        'echo "$SLUICE_BASE_PORT" > seen; while [ ! -e go ]; do sleep 0.05; done'))
    a, b = start(ex, 1), start(ex, 2)
    bases = [int((Path(j.run_dir) / "base_port").read_text()) for j in (a, b)]
    assert bases[0] == default_base_port("same") and bases[1] != bases[0]
    assert all(PORT_LOW <= x <= EPHEMERAL_LOW - BLOCK for x in bases)
    # a restarted service learns the running jobs' blocks from their run directories
    fresh = LocalExecutor(tmp_path / "runs")
    assert fresh.poll(a, time.time()) is None and fresh.poll(b, time.time()) is None
    assert sorted(fresh.ports.taken()["local"]) == sorted(bases)
    for job in (a, b):
        (Path(job.run_dir) / "go").touch()
        assert wait_outcome(ex, job).state == "finished"
        assert int((Path(job.run_dir) / "seen").read_text()) in bases
    assert ex.ports.taken() == {}


def test_sluice_train_is_given_the_block(tmp_path):
    assert '--base-port=$SLUICE_BASE_PORT' in train_command(
        JobRecord(1, 1, "same", SPEC, "running", 0.0),
        StartDecision(1, Placement("1", ("h1",), ("h1",))), tmp_path)
