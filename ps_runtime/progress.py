"""Report training progress to the SDN controller without ever slowing training down.

The worker calls ``reporter.report(batch)`` at the start of every batch; that only
stores the number. A daemon thread sends the latest number at most every
``min_interval`` seconds (latest batch wins, intermediate ones are dropped: the
controller only needs the current batch to rank flows). A controller that is down or
slow costs a log line, once; training goes on.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

Sender = Callable[[str, str, int], None]   # (job, worker id, batch)


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
        client.progress(job, worker, batch, token)

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
        last_send = 0.0
        while True:
            with self._cond:
                while self._latest == self._sent and not self._closed:
                    self._cond.wait()
                if self._latest == self._sent and self._closed:
                    return
            # Rate limit outside the lock so report() stays instant.
            pause = last_send + self.min_interval - time.monotonic()
            if pause > 0 and not self._closed:
                time.sleep(pause)
            with self._cond:
                batch = self._latest
            last_send = time.monotonic()
            try:
                self._send(self.job, self.worker, batch)
                self.sent_count += 1
            except Exception as err:  # noqa: BLE001 -- any failure: log once, keep training
                if not self._failed_once:
                    self._failed_once = True
                    print(f"progress: cannot reach the controller ({err}); training goes on, "
                          "reports keep being tried", file=self._log, flush=True)
            with self._cond:
                self._sent = batch
                if self._closed and self._latest == self._sent:
                    return
