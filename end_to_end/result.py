"""What ``sluice run`` returns: the declared shape of ``RealTimeRun.result()``, beside
the simulator's :class:`job_scheduler.simulation.simulator.SimResult`.

A ``TypedDict``, so the run's ``report.json`` is this value as written and the report
(``end_to_end/report.py``) and the experiment scripts index it as before."""

from __future__ import annotations

from typing import Any, TypedDict


class RunSummary(TypedDict):
    jobs: int
    finished: int
    avg_jct_s: float | None        # seconds, over the finished jobs
    makespan_s: float


class RunResult(TypedDict, total=False):
    topology: str
    policy: str
    interrupted: bool
    compute: str                   # torch | emulated (ps_runtime.compute.describe adds:)
    device: str
    profile: str
    profile_device: str
    priority: bool
    slot_s: float
    emulation_bw_scale: float
    jobs: list[dict[str, Any]]     # per job: name, model, arrival, status, start, finish, ...
    decisions: list[dict[str, Any]]   # per start: t, job, gpus, ps_hosts, worker_hosts, C(n)
    links: list[dict[str, Any]]    # measured link samples
    uplinks: list[str]
    summary: RunSummary            # + preemptions, migrations (+ time_slices, grows,
                                   # shrinks, packed) when the run may suspend (or share)
    preemptions: list[dict[str, Any]]   # per suspension (end_to_end.suspend)
    packings: list[dict[str, Any]]      # per packed start
