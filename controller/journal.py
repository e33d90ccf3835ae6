"""Append-only journal of accepted progress reports (the controller's write-ahead log).

A report is appended (one JSON line; the reports handed over together in one
``os.write`` on an ``O_APPEND`` descriptor) before its HTTP answer is sent. The line is
then in the kernel's page cache: a SIGKILLed or crashed controller loses nothing it
acknowledged (only a host crash/power loss could; progress is soft state that the
workers' next reports restore, so no fsync per report, which would cap the controller
near the disk's fsync rate). The state file is the snapshot; the journal holds what
came after it.

A snapshot is taken in two steps so that writing it (JSON and an fsync: up to 200 ms on
a busy disk) holds up no report: under the service's report lock the state is copied
and the journal *rotated* (its lines move to ``<journal>.1``, new reports go to a fresh
journal); the snapshot is then written with no report lock held, and only once it is in
place is the rotated file dropped. A crash in between replays the rotated lines and then
the journal on top of the older snapshot: nothing acknowledged is lost.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Callable

LOG = logging.getLogger("sluice.controller")


def journal_path(state_file: Path) -> Path:
    return state_file.with_name(state_file.name + ".journal")


def _open_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


class ProgressJournal:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.rotated_path = self.path.with_name(self.path.name + ".1")
        self._fd = _open_append(self.path)
        self.entries = 0            # lines since the last rotation

    def append(self, job: str, worker: str, batch: int) -> None:
        self.append_many([(job, worker, batch)])

    def append_many(self, reports: list[tuple[str, str, int]]) -> None:
        """One write for the reports of a batch (before any of them is answered)."""
        if reports:
            os.write(self._fd, "".join(json.dumps(r, separators=(",", ":")) + "\n"
                                       for r in reports).encode())
            self.entries += len(reports)

    def has_lines(self) -> bool:
        return self.rotated_path.exists() or self.path.stat().st_size > 0

    def rotate(self) -> None:
        """The lines so far move to the rotated file (appended to it when a snapshot
        that was to hold it has not been written yet); new lines go to a fresh journal."""
        if self.rotated_path.exists():
            with open(self.path, "rb") as src, open(self.rotated_path, "ab+") as dst:
                dst.seek(0, os.SEEK_END)
                if dst.tell():                    # a torn last line stays on its own
                    dst.seek(-1, os.SEEK_END)
                    if dst.read(1) != b"\n":
                        dst.write(b"\n")
                dst.write(src.read())
            os.ftruncate(self._fd, 0)
        else:
            os.rename(self.path, self.rotated_path)
            old, self._fd = self._fd, _open_append(self.path)
            os.close(old)
        self.entries = 0

    def drop_rotated(self) -> None:
        """The snapshot that holds every rotated line is in place."""
        self.rotated_path.unlink(missing_ok=True)

    def replay(self, report: Callable[[str, str, int], str]) -> int:
        """Feed every journaled report (the rotated file's, then the journal's) to
        ``report(job, worker, batch)``; returns how many lines were read. A torn last
        line (killed mid-write; never acknowledged) and reports for jobs that no longer
        exist are skipped."""
        n = 0
        for raw in self._lines():
            try:
                job, worker, batch = json.loads(raw)
            except ValueError:
                LOG.warning("%s: skipping a torn or unreadable line", self.path)
                continue
            if not isinstance(batch, int) or isinstance(batch, bool):
                continue
            try:
                report(str(job), str(worker), batch)
            except KeyError:
                pass            # the job was removed after this report
            n += 1
        self.entries = n
        return n

    def _lines(self):
        for path in (self.rotated_path, self.path):
            if path.exists():
                with open(path, "rb") as f:
                    yield from f
