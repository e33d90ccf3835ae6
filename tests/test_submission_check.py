"""A large job file is checked in a child process (job_scheduler.service.submission_check): the
service answers exactly as its in-process parse would, and a file the child cannot check
falls back to the in-process parse."""

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


def test_a_valid_file_passes():
    text = yaml.safe_dump({"jobs": [{"name": f"j{i}", **JOB} for i in range(2000)]})
    assert len(text) > submission_check.LARGE_BODY
    check_in_child(text, "big.yaml", 10_000)          # raises nothing


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


def test_a_child_that_fails_leaves_the_decision_to_the_service(monkeypatch):
    def broken(*a, **kw):
        raise subprocess.TimeoutExpired("child", 1)
    monkeypatch.setattr(submission_check.subprocess, "run", broken)
    check_in_child("jobs: [", "big.yaml", 10)          # no verdict, no exception


def test_the_services_malloc_settings_apply_on_glibc():
    import platform

    from sluice_common.malloc import return_large_buffers_to_the_system

    assert return_large_buffers_to_the_system() == (platform.libc_ver()[0] == "glibc")
