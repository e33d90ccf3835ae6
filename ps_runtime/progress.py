"""Report training progress to the SDN controller without ever slowing training down.

The worker calls ``reporter.report(batch)`` at the start of every batch; that only
stores the number. A daemon thread sends the latest number when :class:`ReportGate`
says it is due (latest batch wins, intermediate ones are dropped: the controller only
needs the current batch to rank flows). The controller's answer says when the next
report matters (``report``: a batch to report at, and a staleness bound; see
controller/report_hints.py); without that hint (an older controller, a failed send) a
report goes at most every ``min_interval`` seconds, as before. A controller that is
down or slow costs a log line, once; training goes on.

This reporter is the one way a job's progress reaches the controller, wherever the job
runs: on this machine, under Slurm, or on the emulated fabric, whose hosts reach the
controller's API over a management network of their own (mininet_fabric/management.py)
as a real cluster's nodes do; nothing else follows the workers' logs to report for them.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, TextIO

# (job, worker id, batch) -> the controller's answer (a dict), or None
Sender = Callable[[str, str, int], Any]


class ReportGate:
    """When the latest batch goes to the controller (pure: the clock is passed in).

    With a hint from the last answer, a report is due once the batch reaches the hint's
    ``batch``, or ``within_s`` after the last report when the batch moved since; else
    (no hint yet, or the controller gave none) every ``min_interval`` as before."""

    def __init__(self, min_interval: float = 0.2) -> None:
        self.min_interval = min_interval
        self.hint_batch: int | None = None
        self.within_s: float | None = None
        self.hinted = False
        self.last_send: float | None = None
        self.sent: int | None = None

    def wait_s(self, batch: int | None, now: float) -> float | None:
        """Seconds until ``batch`` is due (0: now), None: not until the batch moves."""
        if batch is None or batch == self.sent:
            return None
        if self.last_send is None:
            return 0.0                       # the first report goes at once
        if not self.hinted:
            return max(0.0, self.last_send + self.min_interval - now)
        if self.hint_batch is not None and batch >= self.hint_batch:
            return 0.0
        if self.within_s is None:
            return None
        return max(0.0, self.last_send + self.within_s - now)

    def sent_at(self, batch: int, now: float, answer: Any) -> None:
        """``batch`` was sent at ``now``; ``answer``: the controller's (None: failed)."""
        self.sent, self.last_send = batch, now
        hint = answer.get("report") if isinstance(answer, dict) else None
        self.hinted = isinstance(hint, dict)
        if self.hinted:
            self.hint_batch, self.within_s = hint.get("batch"), hint.get("within_s")


def controller_sender(base_url: str, token: str | None = None, timeout: float = 1.0) -> Sender:
    """A sender that posts through the controller's own API client
    (``controller.client.ControllerClient``). Created on first use, in the reporter's
    thread, so that any failure (even an import error) is just a logged report failure."""
    client = None

    def send(job: str, worker: str, batch: int) -> None:
        nonlocal client
        if client is None:
            from controller.client import ControllerClient

            client = ControllerClient(base_url, None, timeout=timeout)
        return client.progress(job, worker, batch, token)

    return send


class ProgressReporter:
    def __init__(self, send: Sender, job: str, worker: str, min_interval: float = 0.2,
                 log: TextIO = sys.stderr):
        self._send = send
        self.job = job
        self.worker = worker
        self.min_interval = min_interval
        self._log = log
        self._cond = threading.Condition()
        self._latest: int | None = None
        self._sent: int | None = None
        self._closed = False
        self._failed_once = False
        self.sent_count = 0
        self.gate = ReportGate(min_interval)
        self._thread = threading.Thread(target=self._run, name="progress-reporter", daemon=True)
        self._thread.start()

    def report(self, batch: int) -> None:
        """Record the current batch. Never blocks on the network."""
        with self._cond:
            self._latest = batch
            self._cond.notify()

    def close(self, timeout: float = 1.0) -> None:
        """Try to deliver the last batch within ``timeout``, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        gate = self.gate
        while True:
            with self._cond:
                while True:
                    wait = gate.wait_s(self._latest, time.monotonic())
                    if wait == 0 or (self._closed and self._latest != self._sent):
                        break
                    if self._closed:
                        return
                    self._cond.wait(wait)    # None: until report() or close()
                batch = self._latest
            answer = None
            try:
                answer = self._send(self.job, self.worker, batch)
                self.sent_count += 1
            except Exception as err:  # noqa: BLE001 -- any failure: log once, keep training
                if not self._failed_once:
                    self._failed_once = True
                    print(f"progress: cannot reach the controller ({err}); training goes on, "
                          "reports keep being tried", file=self._log, flush=True)
            with self._cond:
                gate.sent_at(batch, time.monotonic(), answer)
                self._sent = batch
                if self._closed and self._latest == self._sent:
                    return
