"""The PS runtime's launch and close, measured on ``sluice demo`` runs: what a job spends
holding its GPUs without training, which neither the Proteus model nor the exchange
model's batches count.

- **launch**: the scheduler's decision (the slot boundary at which the job started)
  until its first batch begins: the executor's start of the job, process hand-over from
  the warm pool, ps-lite's rendezvous, ``kv.init``;
- **close**: its last batch's end until its last process has exited: the closing
  barrier, ps-lite's finalize, the processes' exit;
- **server per worker**: what a batch takes beyond the exchange model's price (the run's
  own, ``C_n_s`` over its batches, less the term the run already priced), per worker of
  the job: the server takes each worker's push and answers its pull in turn. Measured
  on the jobs whose PS and workers shared one host, so that no link's model enters it.

Both are read from the per-job records of a run's ``report.json`` (``start``,
``finish``, ``mean_iteration_s``, ``C_n_s``, ``batches`` and the ``iterations`` ``[end_s,
worker, batch, seconds]``; the run's ``slot_s``: its slots are whole multiples of it from
the run's start, and ``server_per_worker_s``, the term its estimator priced, 0 for a run
that recorded none), over the jobs that ran once (a suspended job's records mix two launches), and reported as medians: a
demo run's jobs are few and a single slow launch on a busy machine would move a mean.

``sluice calibrate runtime RUN_DIR... [--write]`` measures them on demo runs'
directories (``sluice demo --out``, no fabric needed) and, with ``--write``, records them
with their provenance in ``sluice_common/data/runtime_overheads.yaml``, which
``ps_runtime.calibration.launch_and_close`` reads.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import sluice_common
from sluice_common.errors import InputError

DATA_FILE = Path(sluice_common.__file__).resolve().parent / "data" / "runtime_overheads.yaml"


@dataclass(frozen=True)
class JobOverheads:
    name: str
    launch_s: float
    close_s: float
    server_per_worker_s: float | None = None     # None: its workers were not on one host


def server_per_worker(record: dict, priced_s: float) -> float | None:
    """A one-host job's batch beyond the run's price of it, per worker (module doc); None
    for a job on several hosts or without the figures."""
    need = ("mean_iteration_s", "C_n_s", "batches", "gpus")
    if record.get("hosts") != 1 or any(not record.get(k) for k in need):
        return None
    workers = record["gpus"]
    priced_batch = record["C_n_s"] / record["batches"] - priced_s * workers
    return (record["mean_iteration_s"] - priced_batch) / workers


def job_overheads(record: dict, slot_s: float, priced_s: float = 0.0) -> JobOverheads | None:
    """One job's launch, close and server time per worker from its run record in a run of
    ``slot_s`` slots whose estimator priced ``priced_s`` per worker; None for a job that
    did not run exactly once to its end (suspended, failed, or without batch records)."""
    if record.get("status") != "finished" or record.get("preemptions", 0):
        return None
    runs = record.get("gpu_runs") or []
    batches = record.get("iterations") or []
    if len(runs) != 1 or not batches:
        return None
    first_begin = min(end - seconds for end, _worker, batch, seconds in batches if batch == 1)
    last_end = max(end for end, *_ in batches)
    decided = math.floor(record["start"] / slot_s + 1e-9) * slot_s
    return JobOverheads(record["name"], first_begin - decided, record["finish"] - last_end,
                        server_per_worker(record, priced_s))


def run_overheads(report: dict) -> list[JobOverheads]:
    """Every measurable job of one arm's ``report.json``."""
    slot_s = report.get("slot_s")
    if not isinstance(slot_s, (int, float)) or not slot_s > 0:
        raise ValueError(f"no slot_s > 0 in the report (got {slot_s!r})")
    priced = float(report.get("server_per_worker_s", 0.0))
    return [o for o in (job_overheads(j, float(slot_s), priced) for j in report.get("jobs", []))
            if o is not None]


def summarise(samples: list[JobOverheads]) -> dict[str, float | int]:
    """The medians the runtime's terms take, and how many jobs they come from."""
    if not samples:
        raise ValueError("no job ran exactly once to its end: nothing to measure")
    one_host = [o.server_per_worker_s for o in samples if o.server_per_worker_s is not None]
    if not one_host:
        raise ValueError("no job that ran once had its PS and workers on one host: the "
                         "server's time per worker cannot be measured")
    return {"launch_s": round(statistics.median(o.launch_s for o in samples), 4),
            "close_s": round(statistics.median(o.close_s for o in samples), 4),
            "jobs": len(samples),
            "server_per_worker_s": round(statistics.median(one_host), 6),
            "one_host_jobs": len(one_host)}


def reports_of(run_dir: Path) -> list[Path]:
    """The arms' reports of a demo run's directory (``arm-*/report.json``)."""
    found = sorted(run_dir.glob("arm-*/report.json"))
    if not found:
        raise InputError(str(run_dir), "no arm-*/report.json (not the output directory of a "
                                       "demo run)")
    return found


def arm_reports(runs: list[Path]):
    """(path, parsed report) of every arm of the runs; InputError naming a file that
    cannot be read."""
    for run in runs:
        for path in reports_of(run):
            try:
                yield path, json.loads(path.read_text())
            except (OSError, ValueError) as err:
                raise InputError(str(path), f"cannot be read ({err})") from err


def measure(runs: list[Path]) -> dict[str, float | int]:
    """The medians over every measurable job of the runs' arms; InputError naming the
    file that cannot be read or holds no report."""
    samples: list[JobOverheads] = []
    for path, report in arm_reports(runs):
        try:
            samples += run_overheads(report)
        except ValueError as err:
            raise InputError(str(path), f"cannot be read ({err})") from err
    try:
        return summarise(samples)
    except ValueError as err:
        raise InputError(", ".join(map(str, runs)), str(err)) from None


def calibrate(runs: list[Path], write: bool, out: Path = DATA_FILE) -> int:
    """``sluice calibrate runtime``: print the medians; ``write``: record them in ``out``."""
    try:
        figures = measure(runs)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"launch {figures['launch_s']:.3f} s, close {figures['close_s']:.3f} s "
          f"(medians over {figures['jobs']} jobs of {len(runs)} runs); server per worker "
          f"{figures['server_per_worker_s'] * 1e3:.2f} ms a batch (median over the "
          f"{figures['one_host_jobs']} of them on one host)")
    if write:
        record_from_runs(out, "The PS runtime's launch, close and server time per worker on "
                         "the emulated fabric, measured on `sluice demo` runs by `sluice "
                         "calibrate runtime`.", figures, "runtime", runs)
    return 0


def record_from_runs(out: Path, header: str, figures: dict, action: str,
                     runs: list[Path]) -> None:
    """Write ``figures`` measured on demo ``runs`` to ``out`` under a comment ``header``,
    with their provenance (the command, its date and commit, the runs)."""
    import textwrap

    import yaml

    from mininet_tests.calibration.report import source_commit

    body = dict(figures, provenance={
        "command": f"sluice calibrate {action} " + " ".join(map(str, runs)) + " --write",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "commit": source_commit(),
        "runs": [str(r) for r in runs]})
    comment = "".join(f"# {line}\n" for line in textwrap.wrap(header, 86))
    out.write_text(comment + yaml.safe_dump(body, sort_keys=False))
    print(f"wrote {out}")
