"""A job store written by schema 2 (``slurm_job_id``) opened by today's code: its Slurm
job ids are carried over to the executor-neutral ``external_id``, in one transaction."""

from __future__ import annotations

import sqlite3

from sluice_common.jobspec import JobSpec
from job_scheduler.service.store import SCHEMA_VERSION, JobStore, spec_to_json

# The jobs table as schema 2 wrote it (a store an older job_scheduler/service/store.py left).
SCHEMA_2 = """
CREATE TABLE submissions (id INTEGER PRIMARY KEY AUTOINCREMENT, idempotency_key TEXT UNIQUE,
    source TEXT NOT NULL, body TEXT NOT NULL, received_at REAL NOT NULL);
CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT,
    submission_id INTEGER NOT NULL REFERENCES submissions(id), name TEXT NOT NULL,
    spec TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN
    ('queued','running','finished','failed','cancelled')), submitted_at REAL NOT NULL,
    gpus INTEGER, placement TEXT, executor TEXT, started_at REAL, expected_end REAL,
    finished_at REAL, pid INTEGER, pid_start TEXT, run_dir TEXT, slurm_job_id INTEGER,
    exit_code INTEGER, attempts INTEGER NOT NULL DEFAULT 0, reason TEXT, not_before REAL);
CREATE INDEX jobs_state ON jobs(state);
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL REFERENCES jobs(id), at REAL NOT NULL, kind TEXT NOT NULL,
    detail TEXT);
PRAGMA user_version=2;
"""


def _old_store(path):
    db = sqlite3.connect(str(path))
    db.executescript(SCHEMA_2)
    db.execute("INSERT INTO submissions VALUES (1, NULL, 'f.yaml', 'jobs: []', 1.0)")
    spec = spec_to_json(JobSpec("a", "resnet18", 1000, 1, 32, 2))
    for job_id, executor, slurm_id, state in ((1, "slurm", 4242, "running"),
                                              (2, "local", None, "finished"),
                                              (3, None, None, "queued")):
        db.execute("INSERT INTO jobs (id, submission_id, name, spec, state, submitted_at, "
                   "executor, slurm_job_id) VALUES (?, 1, ?, ?, ?, 1.0, ?, ?)",
                   (job_id, f"j{job_id}", spec, state, executor, slurm_id))
    db.commit()
    db.close()


def test_a_schema_2_store_keeps_its_slurm_job_ids_as_external_ids(tmp_path):
    path = tmp_path / "old.db"
    _old_store(path)
    store = JobStore(path)
    jobs = {j.id: j for j in store.jobs()}
    assert {i: (j.executor, j.external_id) for i, j in jobs.items()} == {
        1: ("slurm", "4242"), 2: ("local", None), 3: (None, None)}
    assert jobs[1].to_public()["external_id"] == "4242"
    assert "slurm_job_id" not in jobs[1].to_public()
    assert store.pragma("user_version") == SCHEMA_VERSION == 5
    store.update(1, external_id="4243")          # the migrated column is writable
    store.close()
    again = JobStore(path)                        # a second open changes nothing more
    assert [j.external_id for j in again.jobs()] == ["4243", None, None]
    columns = {r[1] for r in sqlite3.connect(str(path)).execute("PRAGMA table_info(jobs)")}
    assert "external_id" in columns and "slurm_job_id" not in columns
    again.close()
