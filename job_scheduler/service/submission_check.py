"""A large job file is checked in a short-lived child process before the service parses it.

Why: parsing and validating a 10,000-job file (~870 KB) builds tens of MiB of small
Python objects. When the file is refused, CPython's allocator keeps most of those arenas
(pinned by objects the service's own threads allocated meanwhile, which ``gc.collect``
and ``malloc_trim`` do not move), so a burst of large bad files left the scheduler at
1.4-1.9x its memory (bench/api/bench_api_burst.py). A child hands all of it back when it
exits; the service parses a large file itself only once the child found it valid (its
jobs are then kept anyway). Small bodies (the usual case) are parsed in-process.

    python -m job_scheduler.service.submission_check SOURCE MAX_JOBS  < body

prints ``{"errors": [...]}`` (each an :meth:`InputError.to_dict`, empty when valid).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from sluice_common.errors import InputError, raise_all

log = logging.getLogger("sluice.scheduler")

LARGE_BODY = 64 * 1024      # bytes; below this the parse's memory is noise
CHILD_TIMEOUT_S = 120.0
MAX_REPORTED = 100          # problems passed back in full


def check_in_child(body: str, source: str, max_jobs: int) -> None:
    """Raise the job file's InputError(s) as the in-process parse would, found by a
    child process. A child that fails to answer (killed, timed out) is logged and the
    caller parses in-process: the check only saves memory, it never decides alone."""
    try:
        done = subprocess.run([sys.executable, "-m", __name__, source, str(max_jobs)],
                              input=body.encode(), capture_output=True,
                              timeout=CHILD_TIMEOUT_S)
        errors = json.loads(done.stdout)["errors"] if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError) as err:
        errors = None
        log.warning("job file check in a child process failed (%s): parsing in-process", err)
    if errors is None:
        return
    raise_all([InputError(e["source"], e["reason"], element=e["element"], field=e["field"])
               for e in errors])


def main(argv: list[str]) -> int:
    from sluice_common.jobspec import parse_jobs_text

    source, max_jobs = argv[0], int(argv[1])
    body = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    try:
        parse_jobs_text(body, source, max_jobs=max_jobs)
        errors: list[dict] = []
    except InputError as err:
        found = err.errors
        errors = [e.to_dict() for e in found[:MAX_REPORTED]]
        if len(found) > MAX_REPORTED:       # the answer is bounded anyway (a few KB)
            errors.append(InputError(source, f"... and {len(found) - MAX_REPORTED} more "
                                     "problems").to_dict())
    json.dump({"errors": errors}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
