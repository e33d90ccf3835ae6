"""``gpu_records`` of ``sluice demo`` (``comparison.json``) and ``sluice demo --executor
slurm`` (``slurm.json``), and the check that each worker had a GPU of its own.

One entry per job run per pass: ``{"pass": NAME, "job": NAME, "gpus": {HOST: [INDEX,
...]}, "start_s": ..., "end_s": ..., "workers": {HOST: COUNT}, "decided": {HOST: [INDEX,
...]}}``, where ``gpus`` is what the job's worker processes recorded they ran on
(``ps_runtime.gpu_binding``), not what was decided, ``workers`` and ``decided`` the
decision's workers and GPU indices per host (under Slurm: the job's record, Slurm's
indices once reconciled), and the times are seconds from the start of that pass.
:func:`check_gpu_records` (also ``python -m end_to_end.gpu_records FILE.json``) says what
is wrong, if anything: two runs that overlap in time on one host holding a GPU in
common, a run whose GPUs on a host are not one per worker there, or workers that ran on
other GPUs than decided. Pure but for the command.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def pass_gpu_records(name: str, result: dict) -> list[dict]:
    """The entries of one pass (a ``sluice run`` result: its jobs' ``gpu_runs``)."""
    out = []
    for job in result.get("jobs", []):
        workers = dict(Counter(job.get("worker_hosts") or []))
        for run in job.get("gpu_runs", []):
            out.append({"pass": name, "job": job["name"], "gpus": run["gpus"],
                        "start_s": run["start_s"], "end_s": run["end_s"], "workers": workers,
                        **({"decided": run["decided"]} if "decided" in run else {})})
    return out


def gpu_records(passes: dict[str, dict]) -> list[dict]:
    """Every pass's entries, passes in the order given."""
    return [e for name, result in passes.items() for e in pass_gpu_records(name, result)]


def slurm_gpu_records(jobs: list[dict], run_dirs: dict[int, Path | None],
                      t0: float) -> list[dict]:
    """The entries of ``sluice demo --executor slurm`` (one pass, ``slurm``): per job
    (its last attempt) the GPUs its worker steps recorded (``RUN_DIR/ran_on``: Slurm's
    binding as each step saw it), its start and end (the service's wall-clock record)
    less ``t0``, the submission."""
    from ps_runtime.gpu_binding import gpus_by_host, read_records
    from ps_runtime.slurm_plan import RAN_ON_DIR

    out = []
    for job in sorted(jobs, key=lambda j: j["id"]):
        run_dir = run_dirs.get(job["id"])
        if job.get("started_at") is None or run_dir is None:
            continue
        end = job.get("finished_at") or job["started_at"]
        ids = (job.get("placement") or {}).get("gpu_ids")
        out.append({"pass": "slurm", "job": job["name"],
                    "gpus": gpus_by_host(read_records(run_dir / RAN_ON_DIR)),
                    "start_s": round(job["started_at"] - t0, 3), "end_s": round(end - t0, 3),
                    "workers": dict(Counter((job.get("placement") or {}).get("worker_hosts", []))),
                    # the job's record: Slurm's indices once reconciled (slurm_gpus)
                    **({"decided": ids} if ids is not None else {})})
    return out


def check_gpu_records(records: list[dict]) -> list[str]:
    """Problems, one line each (empty: every worker on a GPU of its own)."""
    problems = []
    for e in records:
        where = f"pass {e['pass']}, job {e['job']}"
        want = e.get("workers") or {}
        if not e["gpus"]:
            problems.append(f"{where}: its workers recorded no GPU")
        if "decided" in e and e["decided"] != e["gpus"]:
            problems.append(f"{where}: workers ran on {e['gpus']}, decided {e['decided']}")
        for host in sorted(set(want) | set(e["gpus"])):
            got = e["gpus"].get(host, [])
            if len(set(got)) != len(got) or len(got) != want.get(host, 0):
                problems.append(f"{where}: host {host}: GPUs {got} for "
                                f"{want.get(host, 0)} worker(s)")
    for k, a in enumerate(records):
        for b in records[k + 1:]:
            if a["pass"] != b["pass"] or not (a["start_s"] < b["end_s"] and b["start_s"] < a["end_s"]):
                continue
            for host in set(a["gpus"]) & set(b["gpus"]):
                shared = sorted(set(a["gpus"][host]) & set(b["gpus"][host]))
                if shared:
                    problems.append(f"pass {a['pass']}: jobs {a['job']} and {b['job']} overlap "
                                    f"in time on {host} and share GPU(s) {shared}")
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m end_to_end.gpu_records comparison.json|slurm.json", file=sys.stderr)
        return 2
    try:
        records = json.loads(open(argv[0]).read())["gpu_records"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"{argv[0]}: no readable gpu_records: {err}", file=sys.stderr)
        return 2
    problems = check_gpu_records(records)
    for line in problems:
        print(line)
    runs = len(records)
    overlapping = sum(1 for k, a in enumerate(records) for b in records[k + 1:]
                      if a["pass"] == b["pass"] and a["start_s"] < b["end_s"]
                      and b["start_s"] < a["end_s"] and set(a["gpus"]) & set(b["gpus"]))
    print(f"{argv[0]}: {runs} job runs, {overlapping} pairs overlapping on a host: "
          + ("met (disjoint GPUs, one per worker)" if not problems and runs else "NOT met"))
    return 0 if not problems and runs else 1


if __name__ == "__main__":
    sys.exit(main())
