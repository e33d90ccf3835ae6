"""A well-behaved tenant of both services, and the check that nothing it was told is lost.

:class:`ValidClient` submits one-job files to ``sluice scheduler`` (each with its own
Idempotency-Key, retried with the same key until it is answered, so a retry can never
queue a file twice) and sends progress reports for one registered job to ``sluice
controller``, through the project's own clients. It records every request's latency and
everything a service acknowledged: the scheduler's job ids (a 2xx answer) and the last
batch the controller accepted per worker. :meth:`ValidClient.lost` then asks both
services what they hold and names every acknowledged item that is missing.

Used by the hostile-load benchmark (bench/api/bench_hostile.py) and the kill test under
systemd (tests/unit/project/test_systemd_units.py).
"""

from __future__ import annotations

import http.client
import threading
import time
from dataclasses import dataclass, field

from controller.client import ControllerClient, ControllerError
from job_scheduler.service.client import SchedulerClient, ServiceError, Unreachable

JOB_FILE = ("jobs:\n  - {{name: valid-{n}, model: resnet18, dataset_size: 1000, epochs: 1, "
            "batch_size: 32, max_gpus: 1}}\n")
WORKERS = ("w0", "w1")
CONTROLLER_JOB = {"id": "valid-job", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
                  "workers": [{"id": w, "ip": f"10.0.0.{i + 1}", "port": 9001}
                              for i, w in enumerate(WORKERS)]}


@dataclass
class Tally:
    """What the client saw: latencies of answered requests and times to a failure (ms;
    each with whether it went to the scheduler), failures by kind."""
    latencies_ms: list[float] = field(default_factory=list)
    to_scheduler: list[bool] = field(default_factory=list)
    failed_ms: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    accepted_jobs: set[int] = field(default_factory=set)
    acked_batch: dict[str, int] = field(default_factory=dict)

    def fail(self, kind: str) -> None:
        self.failures[kind] = self.failures.get(kind, 0) + 1


class ValidClient:
    """One valid tenant: alternately a submission and a progress report, ``period_s``
    apart, until :meth:`stop`. ``timeout_s`` bounds each request."""

    def __init__(self, scheduler_url: str, scheduler_token: str, controller_url: str,
                 controller_token: str, period_s: float = 0.1, timeout_s: float = 5.0):
        self.scheduler = SchedulerClient(scheduler_url, scheduler_token, timeout=timeout_s)
        self.controller = ControllerClient(controller_url, admin_token=controller_token,
                                           timeout=timeout_s)
        self.timeout_s = timeout_s
        self.period_s = period_s
        self.tally = Tally()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._job_token: str | None = None
        self._n = 0

    def register(self) -> None:
        """Register the job whose progress is reported (once; kept across a restart by the
        controller's state file)."""
        self._job_token = self.controller.register_job(CONTROLLER_JOB)["token"]

    def _timed(self, call) -> bool:
        t0 = time.perf_counter()
        try:
            call()
        except (Unreachable, OSError, http.client.HTTPException) as err:
            self.tally.fail(f"unreachable ({type(err).__name__})")
            self.controller.close()        # a kept-alive connection in an unknown state
        except (ServiceError, ControllerError) as err:
            self.tally.fail(f"HTTP {err.status}")
        else:
            self.tally.latencies_ms.append((time.perf_counter() - t0) * 1000)
            self.tally.to_scheduler.append(call == self._submit)
            return True
        self.tally.failed_ms.append((time.perf_counter() - t0) * 1000)
        return False

    def _submit(self) -> None:
        answer = self.scheduler.submit(JOB_FILE.format(n=self._n), key=f"valid-submission-{self._n}")
        self.tally.accepted_jobs.update(int(j) for j in answer["jobs"])

    def _report(self) -> None:
        worker = WORKERS[self._n % len(WORKERS)]
        batch = self._n + 1
        if self.controller.progress(CONTROLLER_JOB["id"], worker, batch,
                                    self._job_token)["result"] == "accepted":
            self.tally.acked_batch[worker] = batch

    def one_round(self) -> None:
        """One submission (the same key until it is answered) and one report."""
        if self._timed(self._submit):
            if self._timed(self._report):
                self._n += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.one_round()
            self._stop.wait(max(0.0, self.period_s - (time.monotonic() - t0)))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="valid-client", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s * 3)

    def lost(self) -> dict[str, list]:
        """Acknowledged items the services no longer hold: scheduler job ids missing from
        GET /jobs, and workers whose batch there is below the last one accepted."""
        held = {int(j["id"]) for j in self.scheduler.jobs()}
        jobs = {j["id"]: j for j in self.controller.jobs()}
        batches = jobs.get(CONTROLLER_JOB["id"], {}).get("batches", {})
        return {"jobs": sorted(self.tally.accepted_jobs - held),
                "batches": sorted(w for w, b in self.tally.acked_batch.items()
                                  if batches.get(w, -1) < b)}


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by the nearest-rank rule; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]
