"""Progress reports that arrive together go to the service together.

At thousands of reports/s the API's cost per report was mostly the hop from the event
loop to a worker thread and back (a future, a semaphore, a wake-up per report), and 32
threads contending for the service's locks. The batcher queues reports on the event
loop; while the service handles one batch in its thread, the next batch gathers, and
it is handed over in one call (``progress_many`` of the northbound guard, then of the
service: each report checked and recorded, one reconcile for all). Alone, a report is handed over at once
(the next turn of the loop), so batching adds no wait at low rates.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Executor
from typing import Any


class ProgressBatcher:
    def __init__(self, service, executor: Executor | None = None) -> None:
        self.service, self.executor = service, executor
        self._queue: list[tuple[tuple, asyncio.Future]] = []
        self._running = False
        self.batches = 0            # handed-over batches, and reports in them (tests)
        self.reports = 0

    async def report(self, job_id: str, token: str | None, body: Any, t0: float,
                     done: threading.Event | None):
        """The service's answer to one report: (answer, event or None); raises the
        controller.errors exception refusing the report."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.append(((job_id, token, body, t0, done), future))
        if not self._running:
            self._running = True
            loop.call_soon(self._hand_over, loop)   # reports of this loop turn join
        return await future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._queue = self._queue, []
        self.batches += 1
        self.reports += len(batch)
        call = loop.run_in_executor(self.executor, self.service.progress_many,
                                    [item for item, _ in batch])
        call.add_done_callback(lambda f: self._answered(loop, batch, f))

    def _answered(self, loop, batch, call: asyncio.Future) -> None:
        try:
            results = call.result()
        except Exception as err:          # a bug: every report of the batch gets it
            results = [err] * len(batch)
        for (_, future), result in zip(batch, results):
            if future.done():             # the client went away
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        if self._queue:
            self._hand_over(loop)
        else:
            self._running = False
