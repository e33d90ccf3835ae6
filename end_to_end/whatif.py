"""``sluice whatif``'s arithmetic: a trace's arrivals scaled to an offered load, and the
report of the demo's four arms (``end_to_end.arms``) simulated on it. Pure: no file, no
simulator (``end_to_end.whatif_run`` runs the arms, ``end_to_end.whatif_cli`` is the
command).

Offered load, as the demo defines it (``end_to_end.workload_draw.offered_load``): the
GPU-seconds the jobs ask, each job's recorded GPU count times its recorded duration
(``trace_gpus`` x ``trace_duration``), over the cluster's GPUs times the arrival window.
A trace's window is the span of its arrivals, last minus first (the demo's draw has no
last arrival of its own and sums its gaps instead). Scaling to a load ``L`` keeps the
arrivals' shape: every gap to the first arrival is multiplied by one factor, so that the
window becomes ``GPU-seconds / (GPUs x L)``; ``recorded`` keeps the arrivals as they are.

Per arm the report gives the simulator's JCT figures and four of the fabric:

- ``cross_rack_share``: of the jobs whose (last) placement spans more than one host
  (PS and worker hosts together), the share whose hosts are in more than one rack;
- ``uplink_util_p50`` / ``uplink_util_p99``: quantiles of the rack uplinks' utilisation
  over time, every uplink-second weighing the same, from the first arrival to the last
  end (the simulator's ``uplink_time``: an uplink's utilisation is the rate its flows
  carry, averaged over their iterations, over its capacity, piecewise constant between
  the events that re-time a job crossing it; resolution 1/1000);
- ``exchange_share``: the share of all jobs' running time spent in exchange,
  ``(Comm + queueing) / (Cost + Comm + queueing)`` weighted by the seconds run at it
  (under the exchange model the fixed time of a batch's round trips sits in Cost, as the
  estimator has it, and is not counted);
- ``gpu_util``: GPU-seconds run over (the topology's GPUs x makespan).

``b_vs_a`` and ``d_vs_c``: the relative change of the average JCT, ``avg_b / avg_a - 1``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from sluice_common.errors import InputError, option_error
from sluice_common.jobspec import JobSpec

RECORDED = "recorded"
# the pairs the report compares: (key, arm, baseline arm)
PAIRS = (("b_vs_a", "b", "a"), ("d_vs_c", "d", "c"))


def parse_load(text: str | float) -> float | None:
    """``--load``: a number in (0, 1], or ``recorded`` (None: the arrivals as recorded);
    anything else -> InputError on the ``load`` field."""
    if isinstance(text, str) and text.strip().lower() == RECORDED:
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise option_error("load", f"must be a number in (0, 1] or '{RECORDED}', got {text!r}")
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise option_error("load", f"must be in (0, 1], got {text!r}")
    return value


def _recorded(job: JobSpec, source: str) -> tuple[int, float]:
    if not job.trace_gpus or not job.trace_duration:
        raise InputError(source, "has no recorded GPU count and duration (a trace's "
                         "num_gpus and duration): its offered load is unknown",
                         element=f"job '{job.name}'", field="trace_duration")
    return job.trace_gpus, job.trace_duration


def gpu_seconds(jobs: Sequence[JobSpec], source: str = "trace") -> float:
    """The GPU-seconds the jobs ask: recorded GPU count x recorded duration, summed."""
    return sum(g * s for g, s in (_recorded(j, source) for j in jobs))


def arrival_window(jobs: Sequence[JobSpec]) -> float:
    """The span of the arrivals: last minus first (0 for one job)."""
    if not jobs:
        return 0.0
    times = [j.arrival for j in jobs]
    return max(times) - min(times)


def offered_load(jobs: Sequence[JobSpec], total_gpus: int, source: str = "trace") -> float | None:
    """GPU-seconds asked / (GPUs x arrival window); None when the window is 0 (every
    job arrives at once: no rate to speak of)."""
    window = arrival_window(jobs)
    if window <= 0:
        return None
    return gpu_seconds(jobs, source) / (total_gpus * window)


def scale_to_load(jobs: Sequence[JobSpec], total_gpus: int, load: float | None,
                  source: str = "trace") -> tuple[list[JobSpec], float]:
    """The jobs with their arrivals scaled so that their offered load is ``load`` (None:
    as recorded), and the factor applied to every gap to the first arrival. A window of
    0 cannot be scaled: InputError on ``load`` naming the trace."""
    jobs = list(jobs)
    if load is None:
        return jobs, 1.0
    recorded = offered_load(jobs, total_gpus, source)
    if recorded is None:
        what = "one job" if len(jobs) == 1 else f"all {len(jobs)} jobs arrive at one time"
        raise InputError(source, f"{what}: no arrival window to scale to load {load:g} "
                         f"(a load of {RECORDED!r} runs it as it is)", field="load")
    factor = recorded / load
    first = min(j.arrival for j in jobs)
    return [replace(j, arrival=first + (j.arrival - first) * factor) for j in jobs], factor


KNOWN_ERROR = Path(__file__).resolve().parent / "data" / "simulator_error.yaml"


def known_error(path: Path = KNOWN_ERROR) -> dict:
    """The simulator's error against measured runs, as its trust check last recorded it
    (``python -m mininet_tests.simulator_trust --record``): per kind of run, how many
    comparisons were within the bound and the range of the errors. A missing or
    unreadable record is said so, never taken as no error."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        return {"unknown": f"{path}: {err}"}
    if not isinstance(data, dict):
        return {"unknown": f"{path}: not a mapping"}
    return data


def known_error_lines(error: dict) -> list[str]:
    """The record as the lines printed under the table."""
    if "unknown" in error:
        return [f"the simulator's error against measured runs is unknown ({error['unknown']})"]
    lines = []
    for key in ("demo_whatif", "demo", "heavy_tail"):
        kind = error.get(key)
        if not isinstance(kind, dict):
            continue
        lines.append(f"simulator against measured ({kind.get('what', key)}): errors "
                     f"{kind.get('error_min_pct')} to {kind.get('error_max_pct')} %, "
                     f"{kind.get('within_bound')} of {kind.get('comparisons')} within "
                     f"{kind.get('bound_pct')} %, {kind.get('cannot_judge')} cannot judge "
                     f"(judged {error.get('judged')} at {error.get('commit')})")
    return lines or ["the simulator's error record names no kind of run"]


# ---- the report ---------------------------------------------------------------------------

def cross_rack_share(records: Sequence[dict]) -> float:
    """Of the jobs whose placement spans more than one host, the share placed across
    racks (``job_records``' placements; 0 when no job spans hosts)."""
    multi = cross = 0
    for rec in records:
        p = rec.get("placement")
        if not p:
            continue
        if len(set(p["gpus_by_host"]) | set(p["ps_hosts"])) > 1:
            multi += 1
            cross += len(p["racks"]) > 1
    return cross / multi if multi else 0.0


def multi_host_jobs(records: Sequence[dict]) -> int:
    return sum(1 for rec in records if rec.get("placement") and
               len(set(rec["placement"]["gpus_by_host"]) | set(rec["placement"]["ps_hosts"])) > 1)


def bins_quantile(seconds: Sequence[float], q: float) -> float:
    """The ``q`` quantile of a utilisation held ``seconds[k]`` seconds in bin ``k``
    (bin 0: exactly 0; bin k >= 1: up to k / (len - 1)); the bin's upper edge."""
    total = sum(seconds)
    if total <= 0:
        return 0.0
    top = len(seconds) - 1
    target, acc = q * total, 0.0
    for k, s in enumerate(seconds):
        acc += s
        if acc >= target and s > 0:
            return k / top
    return 1.0


def arm_metrics(result, key: str, title: str) -> dict:
    """One arm's figures from its ``SimResult``."""
    multi, cross = result.host_spans()     # cross_rack_share and multi_host_jobs of
    return {                                # its job_records, without building them
        "title": title, "policy": result.policy, "jobs": result.jobs,
        "avg_jct_s": result.avg_jct, "median_jct_s": result.median_jct,
        "p95_jct_s": result.p95_jct, "avg_wait_s": result.avg_wait,
        "makespan_s": result.makespan, "gpu_util": result.gpu_util,
        "cross_rack_share": cross / multi if multi else 0.0,
        "multi_host_jobs": multi,
        "uplink_util_p50": bins_quantile(result.uplink_time, 0.50),
        "uplink_util_p99": bins_quantile(result.uplink_time, 0.99),
        "exchange_share": result.exchange_share,
    }


def relative_change(value: float, baseline: float) -> float | None:
    return value / baseline - 1.0 if baseline else None


def pair_changes(arms: dict[str, dict]) -> dict[str, float | None]:
    """``b_vs_a`` and ``d_vs_c`` for the pairs whose both arms ran."""
    return {name: relative_change(arms[x]["avg_jct_s"], arms[y]["avg_jct_s"])
            for name, x, y in PAIRS if x in arms and y in arms}


def report(*, arms: dict[str, dict], load: float | None, load_requested: float | None,
           load_recorded: float | None, jobs: int, topology: str, total_gpus: int,
           window_s: float, scale: float, **context) -> dict:
    """The whole report, as ``--json`` prints it."""
    out = {"load": load, "load_requested": RECORDED if load_requested is None else load_requested,
           "load_recorded": load_recorded, "jobs": jobs, "topology": topology,
           "total_gpus": total_gpus, "window_s": window_s, "arrival_scale": scale,
           **context, "arms": arms, **pair_changes(arms)}
    return out
