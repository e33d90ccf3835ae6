"""Progress for long work, on stderr, through ``rich``; quiet when stderr is not a terminal.

- :func:`count_bar` — a bar over N things (jobs simulated, points profiled) with elapsed
  time and ETA; the simulator's ``progress(done, total)`` callback.
- :class:`LiveStatus` — one status line that redraws in place (``sluice run``: jobs
  queued/running/done, elapsed, ETA from C(n)); plain log lines keep scrolling above it.

Whether to draw is decided once per object: a log file or a pipe gets no escape codes.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, TextIO

from rich.console import Console
from rich.live import Live
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text


def interactive(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


def _console(stream: TextIO | None = None) -> Console:
    return Console(file=stream or sys.stderr)


def count_bar(label: str, unit: str = "jobs",
              stream: TextIO | None = None) -> Callable[[int, int], None]:
    """``show(done, total)``; the bar closes itself when done reaches total."""
    if not interactive(stream):
        return lambda done, total: None
    progress = Progress(SpinnerColumn(), TextColumn(f"{label:<10}"), BarColumn(),
                        MofNCompleteColumn(), TextColumn(unit), TimeElapsedColumn(),
                        TextColumn("ETA"), TimeRemainingColumn(), console=_console(stream))
    state: dict = {}

    def show(done: int, total: int) -> None:
        if "task" not in state:
            progress.start()
            state["task"] = progress.add_task(label, total=total)
        progress.update(state["task"], completed=done, total=total)
        if done >= total and not state.get("closed"):
            state["closed"] = True
            progress.stop()
    return show


class LiveStatus:
    """A status line redrawn in place; ``print`` logs above it. A no-op off a terminal."""

    def __init__(self, stream: TextIO | None = None):
        self.enabled = interactive(stream)
        self._live = Live(Text(""), console=_console(stream), refresh_per_second=4,
                          transient=True) if self.enabled else None

    def __enter__(self) -> "LiveStatus":
        if self._live:
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live:
            self._live.stop()

    def update(self, text: str) -> None:
        if self._live:
            self._live.update(Text(text, style="bold"))

    def print(self, text: str) -> None:
        if self._live:
            self._live.console.print(text, markup=False, highlight=False)
