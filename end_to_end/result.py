"""What ``sluice run`` returns: the declared shape of ``RealTimeRun.result()``, beside
the simulator's :class:`job_scheduler.simulation.simulator.SimResult`.

The run loop keeps each job's record as a :class:`JobRunRecord` and each measured batch
as an :class:`Iteration` (frozen: a change is a new value). ``RunResult`` is the JSON the
run writes (``report.json``): the records' ``to_json()``, in the shapes the report
(``end_to_end/report.py``), the experiment scripts and older report files use; a reader
that wants names reads a record back with ``JobRunRecord.from_json``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping, TypedDict


@dataclass(frozen=True)
class Iteration:
    """One batch one worker finished: on disk ``[t_s, worker, batch, time_s]``."""
    t_s: float            # run time when the run loop read the worker's line
    worker: int
    batch: int
    time_s: float         # the batch's own duration, as the worker measured it

    def to_json(self) -> list:
        return [self.t_s, self.worker, self.batch, self.time_s]

    @classmethod
    def from_json(cls, row) -> "Iteration":
        t_s, worker, batch, time_s = row
        return cls(float(t_s), int(worker), int(batch), float(time_s))


def iterations_of(job: Mapping[str, Any]) -> list[Iteration]:
    """The iterations of a job record as written (``report.json``)."""
    return [Iteration.from_json(row) for row in job.get("iterations") or ()]


def bw_text(mbps: float | None, ps_hosts, worker_hosts, unit: str = " Mbit/s") -> str:
    """A placement's bandwidth per worker as printed: ``in-host`` when the PS and every
    worker share one host (the exchange never leaves it: its bus rate, the loopback's on
    the emulated fabric, is no fabric figure), else the rate. ``mbps`` None or inf: no
    pair needs a path."""
    import math

    if len(set(ps_hosts) | set(worker_hosts)) <= 1 or mbps is None or math.isinf(mbps):
        return "in-host"
    return f"{mbps:.0f}{unit}"


# fields written (as null) once their stage is reached, even when None: the report's columns
_KEPT_WHEN = {"bw_estimate_mbps": "start", "mean_iteration_s": "finish"}


@dataclass(frozen=True)
class JobRunRecord:
    """One job's record in a run: what it asked, where it ran, how it went."""
    name: str
    model: str
    arrival: float
    status: str                      # not arrived|queued|running|suspended|finished|failed|stopped
    # at its (first) start
    start: float | None = None
    gpus: int | None = None
    ps_hosts: tuple[str, ...] | None = None
    worker_hosts: tuple[str, ...] | None = None
    batches: int | None = None       # per worker
    hosts: int | None = None
    racks: int | None = None
    C_n_s: float | None = None
    bw_estimate_mbps: float | None = None
    predicted_run_s: float | None = None
    bytes_per_batch: int | None = None      # end_to_end.predict.exchange_facts
    keys: int | None = None
    pipeline_keys: int | None = None
    batch_compute_s: float | None = None
    # at its end
    process_exit_s: Mapping[str, float] | None = None
    first_batch_s: float | None = None
    run_s: float | None = None
    finish: float | None = None
    turnaround: float | None = None
    wait: float | None = None
    mean_iteration_s: float | None = None
    iterations: tuple[Iteration, ...] | None = None
    error: str | None = None
    gpu_runs: tuple[dict, ...] | None = None     # gpu_binding.ran_on_entry, per run
    controller: dict | None = None               # what the controller made of the job
    preemptions: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)   # an experiment's measurements

    def with_(self, **changes) -> "JobRunRecord":
        """This record with ``changes``; a name it has no field for goes to ``extra``."""
        names = {f.name for f in fields(self)}
        extra = {k: v for k, v in changes.items() if k not in names}
        known = {k: v for k, v in changes.items() if k in names}
        if extra:
            known["extra"] = {**self.extra, **extra}
        return replace(self, **known)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "extra":
                continue
            if v is None and not (f.name in _KEPT_WHEN
                                  and getattr(self, _KEPT_WHEN[f.name]) is not None):
                continue
            if f.name == "iterations":
                v = [it.to_json() for it in v]
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, Mapping):
                v = dict(v)
            out[f.name] = v
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "JobRunRecord":
        names = {f.name for f in fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        for k in ("ps_hosts", "worker_hosts", "gpu_runs"):
            if known.get(k) is not None:
                known[k] = tuple(known[k])
        if known.get("iterations") is not None:
            known["iterations"] = tuple(Iteration.from_json(r) for r in known["iterations"])
        return cls(**known, extra={k: v for k, v in data.items() if k not in names})


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
    server_per_worker_s: float     # the estimator's term (ps_runtime.calibration)
    emulation_bw_scale: float
    jobs: list[dict[str, Any]]     # per job: name, model, arrival, status, start, finish,
                                   # gpu_runs [{start_s, end_s, gpus: {host: [index]}}]
                                   # (what its workers recorded, per run), ...
    decisions: list[dict[str, Any]]   # per start: t, job, gpus, ps_hosts, worker_hosts,
                                      # gpu_ids {host: [index]}, C(n)
    links: list[dict[str, Any]]    # measured link samples
    uplinks: list[str]
    summary: RunSummary            # + preemptions, migrations (+ time_slices, grows,
                                   # shrinks, packed) when the run may suspend (or share)
    preemptions: list[dict[str, Any]]   # per suspension (end_to_end.suspend)
    packings: list[dict[str, Any]]      # per packed start


def run_result(run) -> RunResult:
    """The result of a ``end_to_end.runloop.RealTimeRun`` (its records, decisions, link
    samples and, when it may suspend, its suspensions and packings)."""
    from end_to_end import closed_loop

    jobs = [run.records.get(j.name, JobRunRecord(j.name, j.model, j.arrival, "not arrived"))
            .to_json() for j in run.jobs]
    done = [j for j in jobs if j.get("status") == "finished"]
    out: RunResult = {
        "topology": run.topology.name, "policy": run.policy_name,
        "interrupted": run.interrupted,
        **(run.options.compute_info or {"compute": run.options.compute}),
        "priority": run.options.priority, "slot_s": run.options.slot_s,
        "server_per_worker_s": run.estimator.server_per_worker_s,
        "emulation_bw_scale": run.topology.emulation_bw_scale,
        "jobs": jobs, "decisions": run.decisions, "links": run.link_samples,
        "uplinks": [f"{a}-{b}" for a, b in closed_loop.switch_links(run.topology)],
        "summary": {
            "jobs": len(jobs), "finished": len(done),
            "avg_jct_s": round(sum(j["turnaround"] for j in done) / len(done), 3) if done else None,
            "makespan_s": round(max((j["finish"] for j in done), default=0.0), 3),
        },
    }
    if run.can_suspend:            # the report's section on suspensions
        s = run.suspensions.summary()
        out["preemptions"] = run.suspensions.entries
        out["summary"].update(preemptions=s["preemptions"], migrations=s["migrations"])
        if any(m.shares for m in run.mechanisms):
            out["packings"] = run.packings
            out["summary"].update(time_slices=s["time_slices"], grows=s["grows"],
                                  shrinks=s["shrinks"], packed=len(run.packings))
    return out
