"""Append-only journal of accepted progress reports (the controller's write-ahead log).

A report is appended (one JSON line, ``os.write`` on an ``O_APPEND`` descriptor) before
its HTTP answer is sent. The line is then in the kernel's page cache: a SIGKILLed or
crashed controller loses nothing it acknowledged (only a host crash/power loss could;
progress is soft state that the workers' next reports restore, so no fsync per report,
which would cap the controller near the disk's fsync rate). The state file is the
snapshot; the journal holds what came after it and is truncated by each snapshot.
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


class ProgressJournal:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.entries = 0

    def append(self, job: str, worker: str, batch: int) -> None:
        line = json.dumps([job, worker, batch], separators=(",", ":")) + "\n"
        os.write(self._fd, line.encode())
        self.entries += 1

    def replay(self, report: Callable[[str, str, int], str]) -> int:
        """Feed every journaled report to ``report(job, worker, batch)``; returns how many
        lines were read. A torn last line (killed mid-write; never acknowledged) and
        reports for jobs that no longer exist are skipped."""
        n = 0
        with open(self.path, "rb") as f:
            for raw in f:
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

    def truncate(self) -> None:
        os.ftruncate(self._fd, 0)
        self.entries = 0
