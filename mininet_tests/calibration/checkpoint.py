"""What a suspension's checkpoint costs, measured on ``sluice demo`` runs' suspensions: the
time a suspended job holds its GPUs past its last batch, and what a resumed one reads
before its first, which the dry run charges (``end_to_end.model_run``).

Worker 0 of an emulated job writes the model's parameters and momentum when it is
suspended and reads them back when it resumes, and logs both (``ps_runtime.emulated_state``:
``worker 0: saved X MB of state in Y s`` in its segment's log, ``... read X MB ... in Y s``
in the next one's). From every suspension of the runs' arms (``report.json``'s
``preemptions``, the job's ``gpu_runs`` and batch records, its logs under ``jobs/JOB/``):

- **write rate** and **read rate** (MB/s): the logged MB over the logged seconds;
- **extra** (s): the job's last batch until its processes exited, less the write and the
  runtime's recorded close (``sluice calibrate runtime``): the stop vote's batch, the
  manifest, the processes' exit.

Each a median over the suspensions. ``sluice calibrate checkpoint RUN_DIR... [--write]``
prints them and, with ``--write``, records them with their provenance in
``sluice_common/data/checkpoint_costs.yaml``, which
``ps_runtime.calibration.checkpoint_costs`` reads. Runs with no suspension measure
nothing: an error (exit 2), the file unchanged.
"""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import sluice_common
from mininet_tests.calibration.runtime import arm_reports, record_from_runs
from sluice_common.errors import InputError

DATA_FILE = Path(sluice_common.__file__).resolve().parent / "data" / "checkpoint_costs.yaml"
SAVED = re.compile(r"worker 0: saved ([0-9.]+) MB of state in ([0-9.]+) s")
READ = re.compile(r"worker 0: resuming after batch \d+, read ([0-9.]+) MB from .* in ([0-9.]+) s")


@dataclass(frozen=True)
class Suspension:
    """One suspension: MB written and seconds, the seconds its job held its GPUs past
    its last batch, and MB read back on resume and seconds (None: not resumed)."""
    job: str
    write_mb: float
    write_s: float
    held_s: float
    read_mb: float | None = None
    read_s: float | None = None


def _logged(path: Path, pattern: re.Pattern) -> tuple[float, float] | None:
    try:
        found = pattern.search(path.read_text(errors="replace"))
    except OSError:
        return None
    return (float(found.group(1)), float(found.group(2))) if found else None


def run_suspensions(report: dict, jobs_dir: Path) -> list[Suspension]:
    """The suspensions of one arm's ``report.json`` whose worker 0 logged its write: a
    job's K-th in ``jobs_dir/JOB/worker0.segmentK.log``, the read after it in the next
    segment's log or, after its last, in ``worker0.log``."""
    records = {j.get("name"): j for j in report.get("jobs", [])}
    seen: dict[str, int] = {}
    out = []
    for p in report.get("preemptions", []):
        name = p.get("job")
        k = seen[name] = seen.get(name, 0) + 1
        rec = records.get(name) or {}
        runs = rec.get("gpu_runs") or []
        # batch numbers go on across a resume: the stop batch is in the K-th run alone
        ends = [end for end, _worker, batch, _s in rec.get("iterations") or []
                if batch == p.get("batch")]
        logs = jobs_dir / str(name)
        wrote = _logged(logs / f"worker0.segment{k}.log", SAVED)
        if wrote is None or len(runs) < k or not ends:
            continue
        later = logs / f"worker0.segment{k + 1}.log"
        read = _logged(later if later.exists() else logs / "worker0.log", READ)
        out.append(Suspension(str(name), wrote[0], wrote[1], runs[k - 1]["end_s"] - max(ends),
                              *(read or (None, None))))
    return out


def figures(suspensions: list[Suspension], close_s: float) -> dict:
    """The medians (module doc); ValueError without a suspension that wrote and one
    that read."""
    wrote = [s for s in suspensions if s.write_s > 0 and s.write_mb > 0]
    read = [s for s in wrote if s.read_s and s.read_mb]
    if not wrote or not read:
        raise ValueError("no suspension whose worker 0 logged its checkpoint's write and "
                         "read: nothing to measure")
    return {"write_mb_s": round(statistics.median(s.write_mb / s.write_s for s in wrote), 1),
            "read_mb_s": round(statistics.median(s.read_mb / s.read_s for s in read), 1),
            "extra_s": round(statistics.median(s.held_s - s.write_s - close_s for s in wrote), 4),
            "suspensions": len(wrote), "resumes": len(read)}


def measure(runs: list[Path]) -> dict:
    """The medians over every suspension of the runs' arms, with the runtime's recorded
    close; InputError naming what cannot be read or holds nothing to measure."""
    from ps_runtime.calibration import launch_and_close

    found: list[Suspension] = []
    for path, report in arm_reports(runs):
        found += run_suspensions(report, path.parent / "jobs")
    try:
        return figures(found, launch_and_close("emulated")[1])
    except ValueError as err:
        raise InputError(", ".join(map(str, runs)), str(err)) from None


def calibrate(runs: list[Path], write: bool, out: Path = DATA_FILE) -> int:
    """``sluice calibrate checkpoint``: print the medians; ``write``: record them in ``out``."""
    try:
        got = measure(runs)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"checkpoint write {got['write_mb_s']:.0f} MB/s, read {got['read_mb_s']:.0f} MB/s, "
          f"{got['extra_s']:.2f} s held beyond the write and the close (medians over "
          f"{got['suspensions']} suspensions, {got['resumes']} resumes, {len(runs)} runs)")
    if write:
        record_from_runs(out, "What a suspension's checkpoint costs on the emulated fabric, "
                         "measured on `sluice demo` runs' suspensions by `sluice calibrate "
                         "checkpoint`.", got, "checkpoint", runs)
    return 0
