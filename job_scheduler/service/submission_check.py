"""A large job file is checked in a short-lived child process before the service parses it.

Why: parsing and validating a 10,000-job file (~870 KB) builds tens of MiB of small
Python objects. When the file is refused, CPython's allocator keeps most of those arenas
(pinned by objects the service's own threads allocated meanwhile, which ``gc.collect``
and ``malloc_trim`` do not move), so a burst of large bad files left the scheduler at
1.4-1.9x its memory (bench/api/bench_api_burst.py). A child hands all of it back when it
exits; the service parses a large file itself only once the child found it valid (its
jobs are then kept anyway). Small bodies (the usual case) are parsed in-process.

The check fails closed: a child that dies (a signal, its CPU-time or memory limit, the
wall-clock timeout) or answers nonsense refuses the body with an InputError naming why;
the body is never parsed in-process after that (it once was, and a body that crashed the
child's parser then crashed the service). The child limits itself (``resource``) before
it reads the body: CHILD_CPU_S seconds of CPU, CHILD_MEMORY bytes of address space. At
most MAX_CHECKS_AT_ONCE bodies are checked at once; a body that finds no free slot within
SLOT_WAIT_S gets :class:`CheckBusy` (the API answers 503 with Retry-After), so twenty
clients sending 1 MiB each cost two children, not twenty.

    python -m job_scheduler.service.submission_check SOURCE MAX_JOBS CPU_S MEMORY < body

prints ``{"errors": [...]}`` (each an :meth:`InputError.to_dict`, empty when valid).
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading

from sluice_common.errors import InputError, raise_all

log = logging.getLogger("sluice.scheduler")

LARGE_BODY = 64 * 1024      # bytes; below this the parse's memory is noise
CHILD_TIMEOUT_S = 30.0      # wall clock (a valid 10,000-job file: ~2 s)
CHILD_CPU_S = 10            # CPU seconds (a valid 10,000-job file: 1.3 s)
CHILD_MEMORY = 512 << 20    # bytes of address space (a valid 10,000-job file: < 150 MiB)
MAX_CHECKS_AT_ONCE = 2
SLOT_WAIT_S = 1.0
RETRY_AFTER_S = 2
MAX_REPORTED = 100          # problems passed back in full

_slots = threading.BoundedSemaphore(MAX_CHECKS_AT_ONCE)


class CheckBusy(Exception):
    """Every slot for a large body's check is taken: retry after ``retry_after`` s."""

    def __init__(self, message: str, retry_after: int = RETRY_AFTER_S):
        super().__init__(message)
        self.retry_after = retry_after


def check_in_child(body: str, source: str, max_jobs: int) -> None:
    """Raise the job file's InputError(s) as the in-process parse would, found by a
    child process; an InputError naming why when the child died on the body or took
    too long; CheckBusy when every slot is taken (or no child could be started)."""
    if not _slots.acquire(timeout=SLOT_WAIT_S):
        raise CheckBusy(f"{MAX_CHECKS_AT_ONCE} large job files are being checked; "
                        f"retry in {RETRY_AFTER_S} s")
    try:
        done = subprocess.run([sys.executable, "-m", __name__, source, str(max_jobs),
                               str(CHILD_CPU_S), str(CHILD_MEMORY)],
                              input=body.encode(), capture_output=True,
                              timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InputError(source, f"refused: checking it took more than {CHILD_TIMEOUT_S:g} "
                         "s (a job file of 10,000 jobs takes about 2 s)")
    except OSError as err:            # no process to be had: the service's state, not the body's
        log.warning("cannot start the job file check: %s", err)
        raise CheckBusy(f"cannot check the job file now ({err.strerror or err})")
    finally:
        _slots.release()
    errors = _verdict(done, source)
    raise_all([InputError(e["source"], e["reason"], element=e["element"], field=e["field"])
               for e in errors])


def _verdict(done: subprocess.CompletedProcess, source: str) -> list[dict]:
    """The child's list of problems, or an InputError saying how the check failed."""
    if done.returncode < 0:
        sig = done.returncode * -1
        name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        why = {signal.SIGXCPU: f"it needed more than {CHILD_CPU_S} s of CPU",
               signal.SIGKILL: "it was killed (CPU or memory limit)"}.get(sig, "the parser "
                                                                           "crashed on it")
        log.warning("job file check died on a body from %s: %s", source, name)
        raise InputError(source, f"refused: the check of this file died ({name}): {why}")
    try:
        answer = json.loads(done.stdout)
        if done.returncode != 0 or not isinstance(answer.get("errors"), list):
            raise ValueError(f"exit status {done.returncode}")
        return answer["errors"]
    except (ValueError, AttributeError) as err:
        last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1]
        log.warning("job file check of a body from %s failed: %s %s", source, err, last)
        raise InputError(source, f"refused: the check of this file failed ({err}"
                         f"{': ' + last[:200] if last else ''})")


def _limit_self(cpu_s: int, memory: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def main(argv: list[str]) -> int:
    from sluice_common.jobspec import parse_jobs_text

    source, max_jobs = argv[0], int(argv[1])
    _limit_self(int(argv[2]), int(argv[3]))         # before a byte of the body is read
    body = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    try:
        parse_jobs_text(body, source, max_jobs=max_jobs)
        errors: list[dict] = []
    except MemoryError:
        errors = [InputError(source, f"refused: checking it needs more than "
                             f"{int(argv[3]) >> 20} MiB").to_dict()]
    except InputError as err:
        found = err.errors
        errors = [e.to_dict() for e in found[:MAX_REPORTED]]
        if len(found) > MAX_REPORTED:       # the answer is bounded anyway (a few KB)
            errors.append(InputError(source, f"... and {len(found) - MAX_REPORTED} more "
                                     "problems").to_dict())
    except BaseException as err:
        # an allocation that fails inside a Rust extension (pydantic-core) reaches us as
        # PyO3's PanicException ("PyObject pointer is null"), not MemoryError: still a
        # refusal, named as what it most likely is under the address-space limit
        if type(err).__name__ != "PanicException":
            raise
        errors = [InputError(source, f"refused: checking it needs more than "
                             f"{int(argv[3]) >> 20} MiB (a native parser failed: "
                             f"{str(err)[:120]})").to_dict()]
    json.dump({"errors": errors}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
