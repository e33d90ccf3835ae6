"""A sacct export through ``load_workload``: the format told by the header or given,
``jobs=N`` keeping arrivals from the first kept job, assumptions only for sacct, and the
report of what was left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from job_scheduler.simulation.sacct_trace import NEVER_STARTED, NO_GPUS
from job_scheduler.simulation.trace_assumptions import DEFAULT_LABEL, assumption_summary
from job_scheduler.simulation.workloads import (TRACE_FORMATS, load_workload,
                                                load_workload_report, trace_kind)
from sluice_common.errors import InputError

EXPORT = """\
JobID|JobName|Partition|Submit|Start|End|State|AllocTRES
5|first|gpu|2024-05-01T10:00:00|2024-05-01T10:00:10|2024-05-01T10:10:10|COMPLETED|gres/gpu=1
5.batch|batch||2024-05-01T10:00:10|2024-05-01T10:00:10|2024-05-01T10:10:10|COMPLETED|gres/gpu=1
6|wait|gpu|2024-05-01T10:01:00|Unknown|Unknown|PENDING|
8|bert-2|gpu|2024-05-01T10:03:00|2024-05-01T10:03:00|2024-05-01T10:13:00|COMPLETED|gres/gpu=4
7|bert-1|gpu|2024-05-01T10:02:00|2024-05-01T10:02:30|2024-05-01T10:12:30|FAILED|gres/gpu=2
9|cpu|cpu|2024-05-01T10:04:00|2024-05-01T10:04:00|2024-05-01T10:14:00|COMPLETED|cpu=1
"""


@pytest.fixture
def export(tmp_path: Path) -> Path:
    path = tmp_path / "site.sacct"
    path.write_text(EXPORT)
    return path


def test_sacct_is_a_trace_format_told_by_its_header(export):
    assert "sacct" in TRACE_FORMATS and trace_kind(export) == "sacct"
    told = load_workload(export)
    assert told == load_workload(export, trace_format="sacct")
    assert [(j.name, j.trace_gpus, j.arrival) for j in told] == [
        ("sacct-5", 1, 0.0), ("sacct-7", 2, 120.0), ("sacct-8", 4, 180.0)]


def test_the_report_says_what_was_left_out(export):
    jobs, trace = load_workload_report(export, trace_format="sacct")
    assert len(jobs) == 3 and trace.left_out == {NEVER_STARTED: ("6",), NO_GPUS: ("9",)}
    assert trace.steps == 1
    assert load_workload_report("proteus-small-dispersed", jobs=3)[1] is None


def test_jobs_n_keeps_arrivals_from_the_first_kept_and_caps_apply(export):
    jobs = load_workload(export, trace_format="sacct", jobs=2)
    assert [(j.name, j.arrival) for j in jobs] == [("sacct-5", 0.0), ("sacct-7", 120.0)]
    paper = load_workload(export, trace_format="sacct", trace_caps="paper")
    assert [j.max_gpus for j in paper] == [8, 8, 8] and [j.trace_gpus for j in paper] == [1, 2, 4]


def test_an_assumptions_file_is_applied_and_summarised(export, tmp_path):
    rules = tmp_path / "assume.yaml"
    rules.write_text('assumptions:\n  - {name: "bert-*", model: resnet50, batch_size: 64}\n')
    jobs = load_workload(export, trace_format="sacct", trace_assumptions=rules)
    assert {j.name: j.model for j in jobs if j.extra["job_name"].startswith("bert")} == \
        {"sacct-7": "resnet50", "sacct-8": "resnet50"}
    assert assumption_summary(jobs) == {"name=bert-*": 2, DEFAULT_LABEL: 1}


def test_assumptions_apply_to_sacct_exports_only(export, tmp_path):
    rules = tmp_path / "assume.yaml"
    rules.write_text("- {name: x, model: vgg16}\n")
    for workload, fmt in (("proteus-small-dispersed", None), (export, "philly")):
        with pytest.raises(InputError) as info:
            load_workload(workload, trace_format=fmt, trace_assumptions=rules)
        assert info.value.field == "trace_assumptions"
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {name: x, model: nosuch}\n")
    with pytest.raises(InputError) as info:
        load_workload(export, trace_format="sacct", trace_assumptions=bad)
    assert (info.value.source, info.value.field) == (str(bad), "model")


def test_philly_jobs_name_their_assumption_too(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                    "2017-10-01 00:00:00,100,2,200,c1\n")
    assert assumption_summary(load_workload(path, trace_format="philly")) == {DEFAULT_LABEL: 1}
