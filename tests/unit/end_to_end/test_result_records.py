"""The typed records: each one's JSON round trip, and the on-disk shapes the
untyped dicts before them wrote still read."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, fields

import pytest
from hypothesis import given, strategies as st

from end_to_end.result import Iteration, JobRunRecord, iterations_of
from ps_runtime.launcher import WorkerOptions
from ps_runtime.slurm_plan import PLAN_FILE, SlurmPlan
from ps_runtime.worker_overrides import WorkerOverrides, overrides_for

finite = st.floats(allow_nan=False, allow_infinity=False, width=32)
names = st.text("abcdefgh0123456789-", min_size=1, max_size=8)


# ---- iterations and the job's run record ---------------------------------------------------

@given(finite, st.integers(0, 64), st.integers(1, 10_000), finite)
def test_an_iteration_round_trips_as_the_four_numbers_it_was(t, worker, batch, time_s):
    it = Iteration(t, worker, batch, time_s)
    row = it.to_json()
    assert row == [t, worker, batch, time_s]           # report.json's shape, by position
    assert Iteration.from_json(json.loads(json.dumps(row))) == it


def test_iterations_of_reads_a_record_as_written_and_one_without_any():
    job = {"name": "j", "iterations": [[1.5, 1, 2, 0.25], [1.0, 0, 1, 0.5]]}
    assert [(it.worker, it.batch) for it in iterations_of(job)] == [(1, 2), (0, 1)]
    assert iterations_of({"name": "q"}) == []


OLD_FINISHED = {   # a record as the run loop wrote it before it was a type
    "name": "j1", "model": "resnet18", "arrival": 0.0, "status": "finished", "start": 1.2,
    "gpus": 2, "ps_hosts": ["h1"], "worker_hosts": ["h2", "h3"], "batches": 10, "hosts": 3,
    "racks": 2, "C_n_s": 4.5, "bw_estimate_mbps": None, "predicted_run_s": 5.0,
    "bytes_per_batch": 4096, "keys": 1, "pipeline_keys": 0, "batch_compute_s": 0.03,
    "process_exit_s": {"worker0": 9.0}, "run_s": 8.0, "finish": 9.2, "turnaround": 9.2,
    "wait": 1.2, "mean_iteration_s": None, "iterations": [[2.0, 0, 1, 0.5]],
    "gpu_runs": [{"start_s": 1.2, "end_s": 9.2, "gpus": {"h2": [0]}}],
    "cpu_wait_s": 0.1, "tcp_rto_s": 0.0}                 # an experiment's sampler fields


def test_a_job_record_reads_an_old_record_and_writes_it_back_unchanged():
    rec = JobRunRecord.from_json(OLD_FINISHED)
    assert rec.worker_hosts == ("h2", "h3") and rec.iterations == (Iteration(2.0, 0, 1, 0.5),)
    assert rec.extra == {"cpu_wait_s": 0.1, "tcp_rto_s": 0.0}
    assert rec.to_json() == OLD_FINISHED
    assert JobRunRecord.from_json(json.loads(json.dumps(rec.to_json()))) == rec


def test_a_queued_record_writes_only_what_it_has():
    rec = JobRunRecord("q", "vgg11", 3.0, "queued")
    assert rec.to_json() == {"name": "q", "model": "vgg11", "arrival": 3.0, "status": "queued"}
    # a started job's bandwidth estimate is a column even when it is local (None)
    started = rec.with_(status="running", start=4.0, bw_estimate_mbps=None)
    assert started.to_json()["bw_estimate_mbps"] is None
    assert "mean_iteration_s" not in started.to_json()


def test_with_makes_a_new_record_and_files_unknown_names_as_extra():
    rec = JobRunRecord("j", "m", 0.0, "queued")
    new = rec.with_(status="running", cpu_wait_s=0.5)
    assert rec.status == "queued" and new.status == "running"
    assert new.extra == {"cpu_wait_s": 0.5} and new.to_json()["cpu_wait_s"] == 0.5
    with pytest.raises(FrozenInstanceError):
        rec.status = "finished"        # type: ignore[misc]


# ---- the Slurm plan ------------------------------------------------------------------------

OLD_PLAN = {   # a plan.json as the Slurm executor wrote it before it was a type
    "run_dir": "/runs/job-1-attempt-1", "job": "j1", "job_yaml": "jobs: []\n",
    "servers": [["h1", "10.0.0.1"]], "workers": [["h2", "10.0.0.2"], ["h3", "10.0.0.3"]],
    "groups": {"h1": 0, "h2": 1, "h3": 2}, "batches": 20, "compute": "emulated",
    "compute_s": 0.03, "bytes_per_batch": 4096, "bw_scale": 0.1, "profile": None,
    "timeout": 600.0, "decided_hosts": ["h1", "h2", "h3"], "base_port": 9100}


def test_the_slurm_plan_reads_an_old_plan_and_writes_it_back_unchanged(tmp_path):
    plan = SlurmPlan.from_json(OLD_PLAN)
    assert plan.workers == (("h2", "10.0.0.2"), ("h3", "10.0.0.3"))
    assert plan.base_port == 9100 and plan.decided_hosts == ("h1", "h2", "h3")
    assert plan.to_json() == OLD_PLAN
    path = plan.write(tmp_path)
    assert path == tmp_path / PLAN_FILE and json.loads(path.read_text()) == OLD_PLAN
    assert SlurmPlan.read(path) == plan == SlurmPlan.read(tmp_path)


def test_the_slurm_plan_keeps_a_field_it_does_not_name_and_defaults_what_is_missing():
    old = {k: v for k, v in OLD_PLAN.items() if k not in ("bw_scale", "timeout", "base_port")}
    plan = SlurmPlan.from_json({**old, "bw_scale": None, "future_field": 3})
    assert plan.bw_scale == 1.0 and plan.timeout is None and plan.base_port is None
    assert plan.to_json()["future_field"] == 3


@given(st.lists(st.tuples(names, names), min_size=1, max_size=4), st.integers(1, 1000),
       st.one_of(st.none(), st.integers(1024, 60000)))
def test_the_slurm_plan_round_trips(hosts, batches, base_port):
    plan = SlurmPlan(run_dir="/r", job="j", job_yaml="y", servers=tuple(hosts[:1]),
                     workers=tuple(hosts), groups={h: k for k, (h, _) in enumerate(hosts)},
                     batches=batches, base_port=base_port,
                     decided_hosts=tuple(sorted({h for h, _ in hosts})))
    assert SlurmPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


# ---- worker overrides ----------------------------------------------------------------------

def test_every_override_is_a_worker_option():
    options = {f.name for f in fields(WorkerOptions)}
    assert {f.name for f in fields(WorkerOverrides)} <= options


def test_a_jobs_overrides_lie_over_every_jobs_and_over_the_options():
    table = {"*": WorkerOverrides(compute="emulated", compute_s=0.5),
             "j": WorkerOverrides(compute_s=0.1, pipeline_keys=2)}
    mine = overrides_for(table, "j")
    assert mine.set_fields() == {"compute": "emulated", "compute_s": 0.1, "pipeline_keys": 2}
    assert overrides_for(table, "other").set_fields() == {"compute": "emulated", "compute_s": 0.5}
    assert overrides_for({}, "j") == WorkerOverrides()
    options = mine.apply(WorkerOptions(seed=4))
    assert (options.compute, options.compute_s, options.pipeline_keys, options.seed) == \
        ("emulated", 0.1, 2, 4)


def test_worker_overrides_round_trip_and_name_an_unknown_field():
    o = WorkerOverrides(compute="emulated", bytes_per_batch=4096, bucket_mb=0.5)
    assert WorkerOverrides.from_json(json.loads(json.dumps(o.to_json()))) == o
    with pytest.raises(ValueError, match="unknown field.*checkpoint_dir"):
        WorkerOverrides.from_json({"checkpoint_dir": "/x"})
