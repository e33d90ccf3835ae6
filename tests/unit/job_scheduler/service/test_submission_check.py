"""A large job file is checked in a child process (job_scheduler.service.submission_check): the
service answers exactly as its in-process parse would; a child that dies, overruns its
limits or cannot be started refuses the file (fail closed, never an in-process parse),
and only a few files are checked at once."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from job_scheduler.service import submission_check
from job_scheduler.service.submission_check import check_in_child
from sluice_common.errors import InputError
from sluice_common.jobspec import parse_jobs_text

JOB = {"model": "resnet18", "batch_size": 32, "dataset_size": 1000, "epochs": 1,
       "max_gpus": 2}


def in_process_error(text: str, max_jobs: int) -> list[dict]:
    with pytest.raises(InputError) as err:
        parse_jobs_text(text, "big.yaml", max_jobs=max_jobs)
    return [e.to_dict() for e in err.value.errors]


def child_error(text: str, max_jobs: int) -> list[dict]:
    with pytest.raises(InputError) as err:
        check_in_child(text, "big.yaml", max_jobs)
    return [e.to_dict() for e in err.value.errors]


def test_a_valid_10000_job_file_passes():
    text = yaml.safe_dump({"jobs": [{"name": f"j{i}", **JOB} for i in range(10_000)]})
    assert len(text) > submission_check.LARGE_BODY
    check_in_child(text, "big.yaml", 10_000)          # raises nothing: under the limits


@pytest.mark.parametrize("case", ["duplicate-names", "too-many", "bad-field"])
def test_the_childs_errors_are_the_in_process_errors(case):
    n = 3000
    jobs = [{"name": f"j{i}", **JOB} for i in range(n)]
    max_jobs = 10_000
    if case == "duplicate-names":
        jobs = [{**j, "name": "same"} for j in jobs[:20]] + jobs[20:]
    elif case == "too-many":
        max_jobs = n - 1
    else:
        jobs[1234]["batch_size"] = -5
    text = yaml.safe_dump({"jobs": jobs})
    assert child_error(text, max_jobs) == in_process_error(text, max_jobs)


def test_many_problems_come_back_bounded():
    text = yaml.safe_dump({"jobs": [{"name": f"j{i}", **JOB, "epochs": -1}
                                    for i in range(1500)]})
    got = child_error(text, 10_000)
    assert len(got) == submission_check.MAX_REPORTED + 1
    assert got[-1]["reason"] == "... and 1400 more problems"
    assert got[:-1] == in_process_error(text, 10_000)[:submission_check.MAX_REPORTED]


def test_a_child_that_times_out_refuses_the_file(monkeypatch):
    def slow(*a, **kw):
        raise subprocess.TimeoutExpired("child", 1)
    monkeypatch.setattr(submission_check.subprocess, "run", slow)
    with pytest.raises(InputError, match="refused: checking it took more than"):
        check_in_child("jobs: [", "big.yaml", 10)


def test_a_child_that_crashes_refuses_the_file_and_nothing_parses_it_again(monkeypatch):
    """The regression this guards: a child that dies on a body must not leave the
    service to parse it itself and die the same way."""
    crashed = subprocess.CompletedProcess([], -11, b"", b"")
    monkeypatch.setattr(submission_check.subprocess, "run", lambda *a, **kw: crashed)
    with pytest.raises(InputError, match=r"died \(SIGSEGV\)"):
        check_in_child("jobs: []", "big.yaml", 10)


@pytest.mark.parametrize("limit,reason", [
    ("CHILD_CPU_S", "needed more than 1 s of CPU"),
    ("CHILD_MEMORY", "needs more than 100 MiB")])
def test_the_child_runs_under_cpu_and_memory_limits(monkeypatch, limit, reason):
    # (a valid 10,000-job file needs 1.3 s of CPU and 100-150 MiB; the real limits are
    # CHILD_CPU_S and CHILD_MEMORY, several times that: test_a_valid_10000_job_file_passes)
    monkeypatch.setattr(submission_check, limit, 1 if limit == "CHILD_CPU_S" else 100 << 20)
    text = yaml.safe_dump({"jobs": [{"name": f"j{i}", **JOB} for i in range(10_000)]})
    text = text * 12 if limit == "CHILD_CPU_S" else text
    with pytest.raises(InputError, match=reason):
        check_in_child(text, "big.yaml", 200_000)


def test_a_child_that_cannot_start_is_busy_not_accepted(monkeypatch):
    def no_fork(*a, **kw):
        raise OSError(11, "Resource temporarily unavailable")
    monkeypatch.setattr(submission_check.subprocess, "run", no_fork)
    with pytest.raises(submission_check.CheckBusy, match="cannot check"):
        check_in_child("jobs: []", "big.yaml", 10)


def test_only_a_few_files_are_checked_at_once(monkeypatch):
    monkeypatch.setattr(submission_check, "SLOT_WAIT_S", 0.05)
    taken = [submission_check._slots.acquire(blocking=False)
             for _ in range(submission_check.MAX_CHECKS_AT_ONCE)]
    try:
        assert all(taken)
        with pytest.raises(submission_check.CheckBusy) as busy:
            check_in_child("jobs: []", "big.yaml", 10)
        assert busy.value.retry_after > 0
    finally:
        for _ in taken:
            submission_check._slots.release()
    with pytest.raises(InputError):             # the slots are back
        check_in_child("jobs: []", "big.yaml", 10)


def test_the_services_malloc_settings_apply_on_glibc():
    import platform

    from sluice_common.malloc import return_large_buffers_to_the_system

    assert return_large_buffers_to_the_system() == (platform.libc_ver()[0] == "glibc")
