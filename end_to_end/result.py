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

    jobs = [run.records.get(j.name, {"name": j.name, "model": j.model,
                                      "arrival": j.arrival, "status": "not arrived"})
            for j in run.jobs]
    done = [j for j in jobs if j.get("status") == "finished"]
    out: RunResult = {
        "topology": run.topology.name, "policy": run.policy_name,
        "interrupted": run.interrupted,
        **(run.options.compute_info or {"compute": run.options.compute}),
        "priority": run.options.priority, "slot_s": run.options.slot_s,
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
