"""Durable job store for the scheduler service: SQLite in WAL mode with synchronous=FULL.

The rule this module exists for: a submission is acknowledged only after its jobs are
on disk. ``add_submission`` writes the submission and all its jobs in ONE transaction
and returns only after the commit (WAL + synchronous=FULL fsyncs the log on commit), so
a ``kill -9`` at any moment leaves either the whole file queued or none of it.

Every state change of a job is one transaction too, and also appends a row to
``events`` (an audit trail: when a job started, where, why it failed). Nothing in here
decides anything; the service decides, the store remembers.

One connection, guarded by a lock: the HTTP threads and the scheduling loop share it.
SQLite serialises writers anyway, and one connection keeps the fsync count at one per
transaction.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from sluice_common.jobspec import JobSpec
from sluice_common.models import Layer

log = logging.getLogger("sluice.scheduler.store")

STATES = ("queued", "running", "finished", "failed", "cancelled")
SCHEMA_VERSION = 5     # 2: jobs.not_before (a job's arrival); 3: jobs.external_id in place
                       # of slurm_job_id; 4: jobs.resume (a suspended job's checkpoint);
                       # 5: jobs.user; older stores are migrated on open (_migrate)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT UNIQUE,             -- lets a client retry a POST without duplicates
    source          TEXT NOT NULL,           -- file name the client gave
    body            TEXT NOT NULL,           -- the YAML exactly as received
    received_at     REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    submission_id INTEGER NOT NULL REFERENCES submissions(id),
    name          TEXT NOT NULL,
    spec          TEXT NOT NULL,             -- JobSpec as JSON
    state         TEXT NOT NULL CHECK (state IN ('queued','running','finished','failed','cancelled')),
    submitted_at  REAL NOT NULL,
    gpus          INTEGER,                   -- GPUs granted (running/ended jobs)
    placement     TEXT,                      -- JSON {ps_hosts, worker_hosts, gpus_by_host}
    executor      TEXT,                      -- a name of executor_registry
    started_at    REAL,                      -- wall clock (time.time()): survives restarts
    expected_end  REAL,                      -- simulated executor: when the job ends
    finished_at   REAL,
    pid           INTEGER,                   -- local executor: process (and group) id
    pid_start     TEXT,                      -- /proc start time, guards against pid reuse
    run_dir       TEXT,                      -- local executor: logs and exit-status file
    external_id   TEXT,                      -- the job in the executor's resource manager
                                             -- (Slurm: the job id, het. job: its leader)
    exit_code     INTEGER,
    attempts      INTEGER NOT NULL DEFAULT 0,
    reason        TEXT,
    not_before    REAL,                      -- submitted_at + the job's arrival: not started,
                                             -- nor shown to the policy, before (NULL: at once)
    resume        TEXT                       -- JSON: what a suspended job resumes from (its
                                             -- checkpoint, work left, restore seconds),
    user          TEXT                       -- the Unix user it runs as (the caller's token's;
                                             -- NULL: the service's own account)
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    at     REAL NOT NULL,
    kind   TEXT NOT NULL,
    detail TEXT
);
"""


# ---- JobSpec <-> JSON ------------------------------------------------------------------

def spec_to_json(spec: JobSpec) -> str:
    return json.dumps(dataclasses.asdict(spec), sort_keys=True)


def spec_from_json(text: str) -> JobSpec:
    data = json.loads(text)
    layers = data.get("layers")
    if layers is not None:
        data["layers"] = tuple(Layer(**layer) for layer in layers)
    known = {f.name for f in dataclasses.fields(JobSpec)}
    return JobSpec(**{k: v for k, v in data.items() if k in known})


# ---- records ---------------------------------------------------------------------------

@dataclass(frozen=True)
class JobRecord:
    id: int
    submission_id: int
    name: str
    spec: JobSpec
    state: str
    submitted_at: float
    gpus: int | None = None
    placement: dict[str, Any] | None = None
    executor: str | None = None
    started_at: float | None = None
    expected_end: float | None = None
    finished_at: float | None = None
    pid: int | None = None
    pid_start: str | None = None
    run_dir: str | None = None
    external_id: str | None = None      # the job's id in its executor's resource manager
    exit_code: int | None = None
    attempts: int = 0
    reason: str | None = None
    not_before: float | None = None
    # A job that was suspended: {checkpoint, work_left, restore_s, suspends, ...}; kept
    # while it waits and runs again, so a restarted service resumes it from its checkpoint.
    resume: dict[str, Any] | None = None
    user: str | None = None            # Unix user it runs as (None: the service's account)

    @property
    def start_not_before(self) -> float:
        """When the job may start at the earliest: its submission plus its ``arrival``."""
        return self.submitted_at if self.not_before is None else self.not_before

    def gpus_by_host(self) -> dict[str, int]:
        return dict((self.placement or {}).get("gpus_by_host", {}))

    def to_public(self) -> dict[str, Any]:
        """What the HTTP API and ``sluice jobs --json`` show."""
        return {
            "id": self.id, "name": self.name, "state": self.state, "gpus": self.gpus,
            "placement": self.placement, "executor": self.executor,
            "submission": self.submission_id, "submitted_at": self.submitted_at,
            "started_at": self.started_at, "expected_end": self.expected_end,
            "finished_at": self.finished_at, "pid": self.pid, "exit_code": self.exit_code,
            "external_id": self.external_id,
            "attempts": self.attempts, "reason": self.reason, "model": self.spec.model,
            "max_gpus": self.spec.max_gpus, "arrival": self.spec.arrival,
            "not_before": self.start_not_before, "resume": self.resume, "user": self.user,
        }


_JOB_COLUMNS = [f.name for f in dataclasses.fields(JobRecord)]


def _row_to_job(row: sqlite3.Row) -> JobRecord:
    values = dict(row)
    values["spec"] = spec_from_json(values["spec"])
    for column in ("placement", "resume"):
        if values[column] is not None:
            values[column] = json.loads(values[column])
    return JobRecord(**values)


@dataclass
class JobUpdate:
    """One job's change for ``JobStore.update_many`` (the arguments of ``update``)."""
    job_id: int
    fields: dict[str, Any]
    expect_state: str | Iterable[str] | None = None
    event: str | None = None
    detail: str | None = None


@dataclass
class _PendingSubmission:
    source: str
    body: str
    specs: list[JobSpec]
    key: str | None
    now: float
    user: str | None = None
    done: bool = False
    result: tuple[int, list[int]] | None = None
    error: Exception | None = None


class DuplicateSubmission(Exception):
    """The idempotency key was seen before; ``job_ids`` are the jobs it created then."""

    def __init__(self, submission_id: int, job_ids: list[int]):
        super().__init__(f"submission {submission_id} already recorded")
        self.submission_id = submission_id
        self.job_ids = job_ids


class KeyReused(Exception):
    """The idempotency key was seen before with a different body (the IETF
    Idempotency-Key draft: 422); nothing was queued."""

    def __init__(self, key: str, submission_id: int):
        super().__init__(f"Idempotency-Key {key!r} was used for submission {submission_id} "
                         "with a different body; use a new key for a new file")


def _in_states(states: Iterable[str] | None) -> tuple[str, list[str]]:
    """The ``WHERE`` clause (and its parameters) of the jobs in ``states``; none: all."""
    if states is None:
        return "", []
    states = list(states)
    return f" WHERE state IN ({','.join('?' * len(states))})", states


# SQLite's INTEGER is a signed 64-bit number: a larger id names no job
MAX_ID = (1 << 63) - 1


class JobStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one per logical change.
        self._db = sqlite3.connect(str(self.path), isolation_level=None,
                                   check_same_thread=False, timeout=30)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        self._pending: list[_PendingSubmission] = []     # group commit (add_submission)
        self._pending_lock = threading.Lock()
        # Told, in commit order and with the store locked, the jobs each committed
        # submission queued: the service keeps its queue in memory from this.
        self.on_queued: Callable[[list[JobRecord]], None] | None = None
        mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise RuntimeError(f"{self.path}: SQLite refused WAL mode (got {mode})")
        # FULL: the WAL is fsynced at every commit, so an acknowledged commit survives
        # a power cut, not just a process kill.
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        with self._lock:
            self._db.executescript(_SCHEMA)
            self._migrate()
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _migrate(self) -> None:
        """A store written by an older version gains the columns added since (their
        NULL reads as the old meaning: ``not_before`` NULL = may start at once,
        ``external_id`` NULL = no job in a resource manager, ``resume`` NULL = never
        suspended, ``user`` NULL = the service's own account), and its Slurm job ids
        (``slurm_job_id``, schema 2) move to ``external_id``: one transaction, so a
        crash leaves the old store as it was."""
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(jobs)")}
        added = (("external_id", "TEXT"), ("not_before", "REAL"), ("resume", "TEXT"),
                 ("user", "TEXT"))
        if {c for c, _ in added} <= columns and "slurm_job_id" not in columns:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for column, kind in added:
                if column not in columns:
                    self._db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")
            if "slurm_job_id" in columns:
                self._db.execute("UPDATE jobs SET external_id = CAST(slurm_job_id AS TEXT) "
                                 "WHERE slurm_job_id IS NOT NULL")
                self._db.execute("ALTER TABLE jobs DROP COLUMN slurm_job_id")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        log.info("%s: job store migrated to schema version %d", self.path, SCHEMA_VERSION)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def pragma(self, name: str) -> Any:
        with self._lock:
            return self._db.execute(f"PRAGMA {name}").fetchone()[0]

    # ---- writes --------------------------------------------------------------------
    @contextmanager
    def _transaction(self):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def add_submission(self, source: str, body: str, specs: Sequence[JobSpec],
                       idempotency_key: str | None = None, now: float | None = None,
                       user: str | None = None) -> tuple[int, list[int]]:
        """Queue every job of one file in one transaction; returns (submission id, job ids)
        after the commit is on disk. Raises DuplicateSubmission for a known key.

        Group commit: submissions that arrive while another commit is being fsynced
        wait for the store, and the first of them to get it writes them all in ONE
        transaction (one fsync), each inside its own savepoint, so one that fails rolls
        back alone. Each caller still returns only after the commit that holds its
        rows; if that commit fails, every caller in it gets the error (none was
        acknowledged). Cost per submission: a few indexed inserts, whatever the queue
        length; the fsync is shared."""
        mine = _PendingSubmission(source, body, list(specs), idempotency_key,
                                  time.time() if now is None else now, user=user)
        with self._pending_lock:
            self._pending.append(mine)
        with self._lock:
            if not mine.done:
                with self._pending_lock:
                    batch, self._pending = self._pending, []
                self._commit_submissions(batch)
        if mine.error is not None:
            raise mine.error
        return mine.result

    def _commit_submissions(self, batch: list["_PendingSubmission"]) -> None:
        """With ``_lock`` held: write ``batch`` in one transaction; settle every entry."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                for k, sub in enumerate(batch):
                    db.execute(f"SAVEPOINT s{k}")
                    try:
                        sub.result = self._insert_submission(db, sub)
                    except Exception as err:
                        db.execute(f"ROLLBACK TO s{k}")
                        sub.error = err
                    db.execute(f"RELEASE s{k}")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            self._tell_queued(batch)
        except Exception as err:       # nothing of the batch is on disk
            for sub in batch:
                sub.result, sub.error = None, err
        finally:
            for sub in batch:
                if sub.result is None and sub.error is None:    # interrupted: not stored
                    sub.error = RuntimeError("submission not committed")
                sub.done = True

    def _tell_queued(self, batch: list["_PendingSubmission"]) -> None:
        """After the commit: the submissions are durable whatever happens here."""
        if self.on_queued is None:
            return
        for sub in batch:
            if sub.result is None:
                continue
            sub_id, job_ids = sub.result
            try:
                self.on_queued([JobRecord(job_id, sub_id, spec.name, spec, "queued", sub.now,
                                          not_before=sub.now + spec.arrival, user=sub.user)
                                for job_id, spec in zip(job_ids, sub.specs)])
            except Exception:
                log.exception("submission %d is stored but its listener failed", sub_id)

    @staticmethod
    def _insert_submission(db: sqlite3.Connection, sub: "_PendingSubmission"
                           ) -> tuple[int, list[int]]:
        if sub.key is not None:
            row = db.execute("SELECT id, body FROM submissions WHERE idempotency_key=?",
                             (sub.key,)).fetchone()
            if row is not None and row[1] != sub.body:
                raise KeyReused(sub.key, row[0])
            if row is not None:
                ids = [r[0] for r in db.execute(
                    "SELECT id FROM jobs WHERE submission_id=? ORDER BY id", (row[0],))]
                raise DuplicateSubmission(row[0], ids)
        sub_id = db.execute(
            "INSERT INTO submissions(idempotency_key, source, body, received_at) "
            "VALUES (?,?,?,?)", (sub.key, sub.source, sub.body, sub.now)).lastrowid
        job_ids = []
        for spec in sub.specs:
            job_id = db.execute(
                "INSERT INTO jobs(submission_id, name, spec, state, submitted_at, not_before, "
                "user) VALUES (?,?,?,'queued',?,?,?)",
                (sub_id, spec.name, spec_to_json(spec), sub.now,
                 sub.now + spec.arrival, sub.user)).lastrowid
            db.execute("INSERT INTO events(job_id, at, kind, detail) VALUES (?,?,?,?)",
                       (job_id, sub.now, "queued", f"submission {sub_id} ({sub.source})"))
            job_ids.append(job_id)
        return sub_id, job_ids

    def update(self, job_id: int, *, expect_state: str | Iterable[str] | None = None,
               event: str | None = None, detail: str | None = None, **fields: Any) -> bool:
        """Change columns of one job (and log an event) in one transaction. With
        ``expect_state`` the change happens only if the job is still in that state —
        so a cancel racing with a start cannot both win. Returns whether it changed."""
        return self.update_many([JobUpdate(job_id, fields, expect_state, event, detail)])[0]

    def update_many(self, updates: Sequence["JobUpdate"]) -> list[bool]:
        """Several ``update``s in ONE transaction (one fsync): a scheduling slot records
        all the jobs it ended, or all it starts, at once. Each keeps its own
        ``expect_state`` guard; returns, per update, whether it changed."""
        statements = [self._update_sql(u) for u in updates]
        changed = []
        if not statements:
            return changed
        now = time.time()
        with self._transaction() as db:
            for u, (sql, params) in zip(updates, statements):
                ok = db.execute(sql, params).rowcount == 1
                if ok and u.event:
                    db.execute("INSERT INTO events(job_id, at, kind, detail) VALUES (?,?,?,?)",
                               (u.job_id, now, u.event, u.detail))
                changed.append(ok)
        return changed

    @staticmethod
    def _update_sql(u: "JobUpdate") -> tuple[str, list[Any]]:
        fields, job_id, expect_state = dict(u.fields), u.job_id, u.expect_state
        unknown = set(fields) - set(_JOB_COLUMNS)
        if unknown:
            raise KeyError(f"unknown job columns: {sorted(unknown)}")
        for column in ("placement", "resume"):
            if fields.get(column) is not None:
                fields[column] = json.dumps(fields[column], sort_keys=True)
        if "state" in fields and fields["state"] not in STATES:
            raise ValueError(f"unknown state {fields['state']!r}")
        sets = ", ".join(f"{k}=?" for k in fields) or "id=id"
        sql = f"UPDATE jobs SET {sets} WHERE id=?"
        params: list[Any] = [*fields.values(), job_id]
        if expect_state is not None:
            states = (expect_state,) if isinstance(expect_state, str) else tuple(expect_state)
            sql += f" AND state IN ({','.join('?' * len(states))})"
            params += list(states)
        return sql, params

    # ---- reads ---------------------------------------------------------------------
    def get(self, job_id: int) -> JobRecord | None:
        if not 0 <= job_id <= MAX_ID:
            return None
        with self._lock:
            row = self._db.execute(f"SELECT {','.join(_JOB_COLUMNS)} FROM jobs WHERE id=?",
                                   (job_id,)).fetchone()
        return _row_to_job(row) if row else None

    def jobs(self, states: Iterable[str] | None = None) -> list[JobRecord]:
        where, params = _in_states(states)
        with self._lock:
            rows = self._db.execute(f"SELECT {','.join(_JOB_COLUMNS)} FROM jobs{where} "
                                    "ORDER BY id", params).fetchall()
        return [_row_to_job(r) for r in rows]

    def page(self, states: Iterable[str] | None = None, after: int = 0, limit: int = 100
             ) -> tuple[list[JobRecord], int, bool]:
        """One page of jobs by id: (the jobs with id > ``after``, at most ``limit``, the
        total matching ``states``, whether more follow)."""
        where, params = _in_states(states)
        after_where = (" AND" if where else " WHERE") + " id > ?"
        with self._lock:
            total = self._db.execute("SELECT COUNT(*) FROM jobs" + where, params).fetchone()[0]
            rows = self._db.execute(f"SELECT {','.join(_JOB_COLUMNS)} FROM jobs" + where
                                    + after_where + " ORDER BY id LIMIT ?",
                                    [*params, after, limit + 1]).fetchall()
        return [_row_to_job(r) for r in rows[:limit]], total, len(rows) > limit

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        return {s: 0 for s in STATES} | {r[0]: r[1] for r in rows}

    def events(self, job_id: int) -> list[tuple[float, str, str | None]]:
        if not 0 <= job_id <= MAX_ID:
            return []
        with self._lock:
            rows = self._db.execute("SELECT at, kind, detail FROM events WHERE job_id=? "
                                    "ORDER BY id", (job_id,)).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]
