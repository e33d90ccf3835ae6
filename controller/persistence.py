"""The state file (a snapshot of jobs, tokens' hashes, the rule, the fabric) and the
progress journal that holds the reports acknowledged after it (controller/journal.py).

A registration, removal, rule change or fabric change is on disk when the call that made
it returns (:meth:`StateStore.save`). Progress reports go to the journal; once it holds
:data:`JOURNAL_COMPACT_AT` of them it is folded into a snapshot written by a thread of
its own, so that no report waits for the disk.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

from sluice_common import rank_rules
from controller.forwarding import FabricView
from controller.journal import ProgressJournal, journal_path
from controller.registry import JOB_FIELDS, Registry, parse_job
from controller.state import Shared
from sluice_common.errors import InputError

LOG = logging.getLogger("sluice.controller")

# The progress journal is folded into the state file after this many reports
# (~60 bytes each: a few MB at most, replayed in well under a second).
JOURNAL_COMPACT_AT = 50_000


class StateStore:
    """Writes the state file and keeps the journal (no-op without a state file)."""

    def __init__(self, shared: Shared) -> None:
        self.s = shared
        self.journal: ProgressJournal | None = None
        # snapshots: captures numbered in order; the latest written; one writer at a time
        self._captured = self._written = 0
        self.snapshot_lock = threading.Lock()
        self.compacting = False
        if shared.config.state_file:
            self.journal = ProgressJournal(journal_path(Path(shared.config.state_file)))
            # Reports acknowledged after the last snapshot: replayed on top of it, then
            # folded into a fresh snapshot so the journal starts empty.
            if self.journal.has_lines():
                replayed = self.journal.replay(shared.registry.report)
                LOG.info("replayed %d progress reports from %s", replayed, self.journal.path)
                self.save()      # also drops a torn last line

    def save(self) -> None:
        """Write the state file now (caller holds the shared lock)."""
        if self.s.config.state_file:
            self.write_snapshot(*self._capture())

    def capture(self) -> tuple[int, dict[str, Any]] | None:
        """Copy the state for a snapshot (caller holds the shared lock); write it with
        :meth:`write_snapshot` once the lock is released, so that the fsync (up to
        seconds on a busy disk) holds up no progress report. None: no state file."""
        return self._capture() if self.s.config.state_file else None

    def _capture(self) -> tuple[int, dict[str, Any]]:
        """Copy the state and rotate the journal in one step for the reports (caller
        holds the shared lock: the fabric is read too); (sequence number, data to write)."""
        s = self.s
        with s.report_lock:
            data = {"version": 1, "rank": s.rank, "jobs": [
                {**{k: v for k, v in j.to_dict().items() if k != "cookie"},
                 "cookie": j.cookie, "token_sha256": s.credentials[j.id],
                 "registered_s": j.registered_s}
                for j in s.registry.jobs.values()],
                "fabric": s.fabric.to_dict()}
            if self.journal is not None:
                self.journal.rotate()
            self._captured += 1
            return self._captured, data

    def write_snapshot(self, seq: int, data: dict[str, Any]) -> None:
        """Write a captured state (no report lock held: reports go on meanwhile); the
        journal's rotated lines are dropped once the latest capture is on disk."""
        with self.snapshot_lock:
            if seq <= self._written:
                return          # a later capture is on disk already
            path = Path(self.s.config.state_file)
            tmp = path.with_name(path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                # json.dumps, not json.dump: only the one-shot call uses the C encoder
                # (dump iterates in Python, ~15x the CPU, 46 ms a snapshot at 2,048
                # workers, all of it holding the GIL that the barrier replies need)
                f.write(json.dumps(data, separators=(",", ":")))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            self._written = seq
            # Only now is every rotated report inside the snapshot (a crash before this
            # line replays them again: reports are idempotent, batches only go up).
            with self.s.report_lock:
                if self.journal is not None and self._captured == seq:
                    self.journal.drop_rotated()

    def compact_if_due(self) -> None:
        """Fold a long journal into a snapshot without holding up reports: captured here
        (caller holds the shared lock), written by a thread of its own."""
        if self.journal is None or self.compacting \
                or self.journal.entries < JOURNAL_COMPACT_AT:
            return
        self.compacting = True
        seq, data = self._capture()

        def write() -> None:
            try:
                self.write_snapshot(seq, data)
            except OSError:
                LOG.exception("could not write the state file (the journal keeps the reports)")
            finally:
                self.compacting = False

        threading.Thread(target=write, name="sluice-snapshot", daemon=True).start()


def load_state(path: Path, known_ips: set[str], fabric: FabricView,
               now: float | None = None) -> tuple[Registry, dict[str, str], str | None]:
    """Jobs (endpoints, cookies, batches, token hashes, registration times) saved before
    a restart, with ``fabric`` restored in place: (registry, job id -> credential, the
    ranking rule saved or None in files written before it was). A job saved without its
    registration time counts as registered at ``now`` (default: the wall clock's time).
    A bad file is an InputError: the controller refuses to start."""
    now = time.time() if now is None else now
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise InputError(str(path), f"cannot read state file: {err}")
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise InputError(str(path), "not a sluice controller state file", field="jobs")
    rank = data.get("rank")
    if rank is not None and rank not in rank_rules.names():
        raise InputError(str(path), f"must be one of {', '.join(rank_rules.names())}, "
                         f"got {rank!r}", field="rank")
    registry = Registry()
    tokens = {}
    for i, raw in enumerate(data["jobs"]):
        if not isinstance(raw, dict):
            raise InputError(str(path), "must be an object", element=f"job #{i + 1}")
        extra = {k: raw.get(k) for k in ("cookie", "token_sha256", "batches", "registered_s")}
        body = {k: raw.get(k) for k in JOB_FIELDS if raw.get(k) is not None}
        job = parse_job(body, known_ips, source=str(path))
        if not isinstance(extra["cookie"], int) or not isinstance(extra["token_sha256"], str):
            raise InputError(str(path), "missing cookie or token_sha256",
                             element=f"job '{job.id}'")
        batches = extra["batches"] or {}
        if not isinstance(batches, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for v in batches.values()):
            raise InputError(str(path), "must map worker ids to batches >= 0",
                             element=f"job '{job.id}'", field="batches")
        job.batches = dict(batches)
        registered = extra["registered_s"]
        if registered is None:
            registered = now
        if isinstance(registered, bool) or not isinstance(registered, (int, float)) or \
                not math.isfinite(registered):
            raise InputError(str(path), "must be a finite number of seconds",
                             element=f"job '{job.id}'", field="registered_s")
        job.registered_s = float(registered)
        try:
            registry.add(job, cookie=extra["cookie"])
        except InputError as err:
            raise InputError(str(path), err.reason, element=err.element)
        tokens[job.id] = extra["token_sha256"]
    if data.get("fabric") is not None:
        try:
            fabric.restore(data["fabric"])
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise InputError(str(path), f"bad fabric entry: {err}", field="fabric")
    LOG.info("restored %d jobs from %s", len(tokens), path)
    return registry, tokens, rank
