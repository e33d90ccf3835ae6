"""The scheduler service's SQLite job store: durability settings, atomic submissions,
idempotent retries, guarded state changes, JobSpec round trips."""

import multiprocessing
import os
import signal

import pytest

from sluice_common.jobspec import JobSpec, parse_jobs_text
from sluice_common.models import Layer
from job_scheduler.service.store import (SCHEMA_VERSION, DuplicateSubmission, JobStore,
                                         spec_from_json, spec_to_json)

FILE = """jobs:
  - {name: a, model: resnet18, dataset_size: 1000, epochs: 1, batch_size: 32, max_gpus: 2}
  - {name: b, model: vgg16, dataset_size: 1000, epochs: 1, batch_size: 32, max_gpus: 4}
"""


@pytest.fixture
def store(tmp_path):
    s = JobStore(tmp_path / "jobs.db")
    yield s
    s.close()


def test_wal_and_full_sync(store):
    assert store.pragma("journal_mode") == "wal"
    assert store.pragma("synchronous") == 2          # FULL: fsync at every commit
    assert store.pragma("user_version") == SCHEMA_VERSION == 5


def test_submission_is_one_transaction(store):
    specs = parse_jobs_text(FILE, "f.yaml")
    sub, ids = store.add_submission("f.yaml", FILE, specs)
    assert [j.name for j in store.jobs()] == ["a", "b"]
    assert all(j.state == "queued" and j.submission_id == sub for j in store.jobs())
    assert ids == [j.id for j in store.jobs()]

    class Unserialisable(JobSpec):      # fails while the 2nd job is being written
        pass

    bad = [specs[0], Unserialisable(**{**specs[1].__dict__, "extra": {"x": object()}})]
    with pytest.raises(TypeError):
        store.add_submission("g.yaml", FILE, bad)
    # the first job of the failed file was rolled back with it
    assert len(store.jobs()) == 2
    assert store.counts()["queued"] == 2


def test_idempotency_key_makes_retries_harmless(store):
    specs = parse_jobs_text(FILE, "f.yaml")
    sub, ids = store.add_submission("f.yaml", FILE, specs, idempotency_key="key-12345")
    with pytest.raises(DuplicateSubmission) as dup:
        store.add_submission("f.yaml", FILE, specs, idempotency_key="key-12345")
    assert (dup.value.submission_id, dup.value.job_ids) == (sub, ids)
    assert len(store.jobs()) == 2


def test_guarded_update_and_events(store):
    _, (a, b) = store.add_submission("f.yaml", FILE, parse_jobs_text(FILE))
    assert store.update(a, expect_state="queued", state="running", gpus=2,
                        placement={"ps_hosts": ["h1"], "worker_hosts": ["h1", "h1"],
                                   "gpus_by_host": {"h1": 2}}, event="started")
    # a second transition from 'queued' loses: the job is no longer queued
    assert not store.update(a, expect_state="queued", state="cancelled", event="cancelled")
    job = store.get(a)
    assert job.state == "running" and job.gpus_by_host() == {"h1": 2}
    assert [e[1] for e in store.events(a)] == ["queued", "started"]
    with pytest.raises(ValueError):
        store.update(b, state="exploded")
    with pytest.raises(KeyError):
        store.update(b, colour="red")
    assert store.get(b).state == "queued"


def test_reopen_keeps_everything(tmp_path):
    s = JobStore(tmp_path / "db")
    _, ids = s.add_submission("f.yaml", FILE, parse_jobs_text(FILE))
    s.update(ids[0], state="finished", exit_code=0)
    s.close()
    again = JobStore(tmp_path / "db")
    assert [(j.id, j.state) for j in again.jobs()] == [(ids[0], "finished"), (ids[1], "queued")]
    again.close()


def test_spec_json_round_trip_with_layers():
    spec = JobSpec("c", "custom", 100, 2, 8, 3, arrival=1.5, num_ps=2,
                   layers=(Layer("conv", 1, 8, 3), Layer("fc", 8, 10, h=4, w=4)))
    assert spec_from_json(spec_to_json(spec)) == spec


def _commit_then_die(path, conn):
    s = JobStore(path)
    _, ids = s.add_submission("f.yaml", FILE, parse_jobs_text(FILE))
    conn.send(ids)                       # "acknowledged"
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no atexit, no flush


def test_committed_submission_survives_sigkill(tmp_path):
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("fork").Process(target=_commit_then_die,
                                                       args=(tmp_path / "db", child))
    proc.start()
    ids = parent.recv()
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL
    s = JobStore(tmp_path / "db")
    assert [j.id for j in s.jobs()] == ids
    s.close()
