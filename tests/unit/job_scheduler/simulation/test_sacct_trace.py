"""A site's sacct export as a trace: both shapes (``--json`` of 22.05 and of later data
parsers, ``--parsable2``), step lines, jobs that never ran, TRES and GRES forms, bad
exports named by file and field."""

from __future__ import annotations

import json

import pytest

from job_scheduler.simulation.sacct_trace import (JSON_GPU_FIELD, NEVER_STARTED, NO_GPUS,
                                                  NOT_ENDED, ZERO_TIME, gres_gpus,
                                                  load_sacct, parse_sacct, parse_time,
                                                  tres_gpus)
from job_scheduler.simulation.trace_assumptions import (DEFAULT_LABEL, Assumption,
                                                        philly_model)
from job_scheduler.simulation.trace_errors import TraceErrors
from sluice_common.errors import InputError

HEADER = "JobID|JobName|Partition|Submit|Start|End|State|AllocTRES"
PARSABLE = "\n".join([
    HEADER,
    "100|train-a|gpu|2024-05-01T10:00:00|2024-05-01T10:00:05|2024-05-01T11:00:05|COMPLETED|"
    "billing=4,cpu=4,gres/gpu=2,mem=1000M,node=1",
    "100.batch|batch||2024-05-01T10:00:05|2024-05-01T10:00:05|2024-05-01T11:00:05|COMPLETED|"
    "cpu=4,gres/gpu=2,mem=1000M,node=1",
    "100.extern|extern||2024-05-01T10:00:05|2024-05-01T10:00:05|2024-05-01T11:00:05|"
    "COMPLETED|billing=4,cpu=4,gres/gpu=2,mem=1000M,node=1",
    "100.0|python||2024-05-01T10:00:06|2024-05-01T10:00:06|2024-05-01T11:00:04|COMPLETED|"
    "cpu=4,gres/gpu=2,mem=1000M,node=1",
    "101|bert-x|gpu|2024-05-01T10:10:00|Unknown|Unknown|PENDING|",
    "102|cpu-only|cpu|2024-05-01T10:20:00|2024-05-01T10:20:00|2024-05-01T10:30:00|COMPLETED|"
    "billing=1,cpu=1,mem=1G,node=1",
    "103|bert-y|gpu|2024-05-01T10:30:00|None|2024-05-01T10:31:00|CANCELLED by 0|",
    "104|typed|gpu|2024-05-01T10:40:00|2024-05-01T10:40:00|2024-05-01T12:40:00|TIMEOUT|"
    "cpu=8,gres/gpu:a100=4,node=1",
    "105|still|gpu|2024-05-01T10:50:00|2024-05-01T10:50:00|Unknown|RUNNING|gres/gpu=1",
    "106|blink|gpu|2024-05-01T10:55:00|2024-05-01T10:56:00|2024-05-01T10:56:00|FAILED|"
    "gres/gpu=1",
    "107|a|b|c|gpu|2024-05-01T11:00:00|2024-05-01T11:00:00|2024-05-01T11:05:00|COMPLETED|"
    "gres/gpu=8,gres/gpu:v100=8",
]) + "\n"


def job_22_05(job_id, name, gpus, submit, start, end, state="COMPLETED", partition="gpu"):
    """One job as 22.05's data parser (openapi/dbv0.0.38) writes it; a job cancelled
    while pending has its cancel time as start and end, and no allocation."""
    ran = start and not (state == "CANCELLED" and start == end)
    tres = [{"type": "cpu", "name": None, "id": 1, "count": 4},
            {"type": "mem", "name": None, "id": 2, "count": 1000},
            {"type": "node", "name": None, "id": 4, "count": 1}]
    if gpus:
        tres.append({"type": "gres", "name": "gpu", "id": 1001, "count": gpus})
    return {"account": "physics", "job_id": job_id, "name": name, "partition": partition,
            "state": {"current": state, "reason": "None"},
            "time": {"elapsed": max(0, end - start) if start else 0, "eligible": submit,
                     "end": end, "start": start, "submission": submit, "suspended": 0,
                     "limit": 600},
            "tres": {"allocated": tres if ran else [], "requested": tres},
            "steps": [{"step": {"id": f"{job_id}.batch", "name": "batch"},
                       "tres": {"allocated": tres}}] if ran else []}


def set_number(n):
    return {"set": True, "infinite": False, "number": n}


def job_newer(job_id, name, gpus, submit, start, end, state="COMPLETED"):
    """The same job as later data parsers write it: times as {set, infinite, number},
    the state a list (the state, then flags), a typed GPU entry."""
    job = job_22_05(job_id, name, gpus, submit, start, end, state)
    job["time"] = {k: (set_number(v) if k in ("submission", "start", "end") else v)
                   for k, v in job["time"].items()}
    if not start:
        job["time"]["start"] = {"set": False, "infinite": False, "number": 0}
    job["state"] = {"current": [state], "reason": "None"}
    if gpus and job["tres"]["allocated"]:
        job["tres"]["allocated"] = [t for t in job["tres"]["allocated"] if t["type"] != "gres"]
        job["tres"]["allocated"].append({"type": "gres", "name": "gpu:a100", "id": 1002,
                                         "count": gpus})
    return job


def export(*jobs) -> str:
    return json.dumps({"meta": {"plugin": {"type": "openapi/dbv0.0.38"}}, "errors": [],
                       "jobs": list(jobs)})


T0 = 1_714_557_600


# ---- parsable2 ---------------------------------------------------------------------------

def test_parsable2_keeps_allocations_that_ran_with_gpus_and_counts_the_rest():
    trace = parse_sacct(PARSABLE, "site.txt")
    assert trace.form == "parsable2" and trace.gpu_field == "AllocTRES"
    assert [j.name for j in trace.jobs] == ["sacct-100", "sacct-104", "sacct-107"]
    assert [j.trace_gpus for j in trace.jobs] == [2, 4, 8]      # typed gres summed only alone
    assert [j.max_gpus for j in trace.jobs] == [2, 4, 8]
    assert [j.trace_duration for j in trace.jobs] == [3600.0, 7200.0, 300.0]
    assert [j.arrival for j in trace.jobs] == [0.0, 2400.0, 3600.0]
    assert trace.steps == 3                                      # .batch, .extern, .0
    assert trace.left_out == {NEVER_STARTED: ("101", "103"), NOT_ENDED: ("105",),
                              NO_GPUS: ("102",), ZERO_TIME: ("106",)}
    assert trace.left_out_counts() == {NEVER_STARTED: 2, NOT_ENDED: 1, NO_GPUS: 1,
                                       ZERO_TIME: 1}
    lines = trace.report_lines()
    assert "3 job(s) kept, 5 left out" in lines[0] and "3 step line(s)" in lines[0]
    assert any("left out 2: never started" in line and "101, 103" in line for line in lines)
    first = trace.jobs[0]
    assert first.extra["job_name"] == "train-a" and first.extra["partition"] == "gpu"
    assert first.extra["state"] == "COMPLETED" and first.extra["assumption"] == DEFAULT_LABEL
    assert trace.jobs[2].extra["job_name"] == "a|b|c"            # a name holding '|'


@pytest.mark.parametrize("field,cells,reason", [
    ("AllocTRES", "CANCELLED by 0|", NEVER_STARTED),         # cancelled pending: nothing allocated
    ("ReqTRES", "CANCELLED by 0|gres/gpu=2", NEVER_STARTED),  # no allocation field: its 0 s
    ("AllocTRES", "COMPLETED|gres/gpu=2", ZERO_TIME),
])
def test_a_job_cancelled_while_pending_is_recorded_with_a_start_and_never_started(
        field, cells, reason):
    body = (f"JobID|Submit|Start|End|State|{field}\n"
            f"1|1000|1050|1050|{cells}\n2|1000|1000|1100|CANCELLED by 0|gres/gpu=1\n")
    trace = parse_sacct(body, "x.txt")
    assert trace.left_out == {reason: ("1",)}
    assert [(j.name, j.trace_duration) for j in trace.jobs] == [("sacct-2", 100.0)]


def test_the_default_assumption_is_the_philly_rule_on_gpu_time():
    trace = parse_sacct(PARSABLE, "site.txt")
    for job in trace.jobs:
        assert job.model == philly_model(job.trace_duration * job.trace_gpus)
        assert job.batch_size == 32 and job.epochs == 1 and job.num_ps == 1
        assert job.dataset_size == 32 * job.trace_gpus * round(job.trace_duration)
    assert {j.model for j in trace.jobs} == {"googlenet", "resnet18"}


def test_assumptions_first_match_wins_and_gaps_come_from_the_default():
    rules = (Assumption(partition="gpu", name="typed*", model="resnet50", batch_size=64),
             Assumption(partition="g*", num_ps=2))
    jobs = {j.name: j for j in parse_sacct(PARSABLE, "site.txt", rules).jobs}
    typed, train = jobs["sacct-104"], jobs["sacct-100"]
    assert (typed.model, typed.batch_size, typed.num_ps) == ("resnet50", 64, 1)
    assert typed.extra["assumption"] == "partition=gpu name=typed*"
    assert typed.dataset_size == 64 * 4 * 7200
    assert (train.model, train.batch_size, train.num_ps) == ("googlenet", 32, 2)
    assert train.extra["assumption"] == "partition=g*"
    assert jobs["sacct-107"].extra["assumption"] == "partition=g*"
    alone = parse_sacct(PARSABLE, "site.txt", (Assumption(name="bert-*", model="vgg16"),))
    assert {j.extra["assumption"] for j in alone.jobs} == {DEFAULT_LABEL}   # bert-* never ran


@pytest.mark.parametrize("field,text,gpus", [
    ("AllocTRES", "billing=4,cpu=4,gres/gpu=2,mem=1000M,node=1", 2),
    ("AllocTRES", "cpu=4,gres/gpu:a100=2,gres/gpu:v100=1", 3),
    ("AllocTRES", "cpu=4,gres/gpu=3,gres/gpu:a100=3", 3),
    ("ReqTRES", "cpu=1,gres/gpu=1", 1),
    ("AllocGRES", "gpu:2", 2),
    ("AllocGRES", "gpu:tesla:2(IDX:0,1)", 2),
    ("AllocGRES", "gpu:a100:1,gpu:v100:2(IDX:0-1),mps:100", 3),
    ("ReqGRES", "gpu", 1),
])
def test_gpu_fields_in_each_form(field, text, gpus):
    body = (f"JobID|Submit|Start|End|{field}\n"
            f"7|1000|1010|1110|{text}\n")
    trace = parse_sacct(body, "x.txt")
    assert trace.gpu_field == field and trace.jobs[0].trace_gpus == gpus
    assert trace.jobs[0].trace_duration == 100.0                 # epoch seconds read too


def test_the_tres_and_gres_readers():
    assert tres_gpus("cpu=1,mem=1G") is None and tres_gpus("") is None
    assert tres_gpus("gres/gpu=0") == 0
    assert tres_gpus("gres/gpumem=8G,gres/gpu=1") == 1           # gpumem is not a GPU
    assert gres_gpus("mps:100") is None and gres_gpus("gpu:a100") == 1
    with pytest.raises(ValueError):
        tres_gpus("gres/gpu=two")
    assert parse_time("Unknown") is None and parse_time("None") is None
    assert parse_time("2024-05-01T10:00:01") - parse_time("2024-05-01T10:00:00") == 1.0
    with pytest.raises(ValueError):
        parse_time("yesterday")


def test_a_header_without_a_gpu_field_names_the_file_and_field(tmp_path):
    path = tmp_path / "cpu.txt"
    path.write_text("JobID|JobName|Submit|Start|End|State\n1|a|1000|1001|1100|COMPLETED\n")
    with pytest.raises(InputError) as info:
        load_sacct(path)
    err = info.value
    assert err.source == str(path) and err.field == "AllocTRES" and err.element == "line 1"
    assert "no GPU field" in err.reason and "AllocTRES" in err.reason


def test_an_export_whose_jobs_name_no_gpu_says_the_accounting_records_none():
    body = "JobID|Submit|Start|End|AllocTRES\n1|1000|1001|1100|cpu=1,node=1\n" \
           "2|1000|1002|1200|cpu=2,node=1\n"
    with pytest.raises(InputError) as info:
        parse_sacct(body, "nogpu.txt")
    err = info.value
    assert (err.source, err.field) == ("nogpu.txt", "AllocTRES")
    assert "AccountingStorageTRES=gres/gpu" in err.reason and "2 no GPUs" in err.reason


def test_an_export_where_nothing_ran_is_refused_with_the_counts():
    body = "JobID|Submit|Start|End|AllocTRES\n1|1000|Unknown|Unknown|\n2|1000|None|1200|\n"
    with pytest.raises(InputError, match="no job of the export ran with GPUs.*2 never started"):
        parse_sacct(body, "pending.txt")


@pytest.mark.parametrize("body,field,element", [
    ("JobName|Submit\nx|1\n", "JobID", "line 1"),
    ("JobID|Submit|Start|AllocTRES\n1|1|2|gres/gpu=1\n", "End", "line 1"),
    (f"{HEADER}\n1|a|gpu|when|2024-05-01T10:00:00|2024-05-01T11:00:00|COMPLETED|gres/gpu=1\n",
     "Submit", "line 2 (job 1)"),
    (f"{HEADER}\n1|a|gpu|Unknown|2024-05-01T10:00:00|2024-05-01T11:00:00|COMPLETED|"
     "gres/gpu=1\n", "Submit", "line 2 (job 1)"),
    (f"{HEADER}\n1|a|gpu|1|2|3|COMPLETED|gres/gpu=x\n", "AllocTRES", "line 2 (job 1)"),
    (f"{HEADER}\n1|a|gpu|1|2\n", None, "line 2"),
])
def test_bad_parsable2_exports_name_the_field(body, field, element):
    with pytest.raises(InputError) as info:
        parse_sacct(body, "bad.txt")
    err = info.value
    assert (err.source, err.field, err.element) == ("bad.txt", field, element), err


def test_every_bad_line_at_once_and_a_count_past_the_first_hundred():
    body = HEADER + "\n" + "".join(f"{i}|a|gpu|x|1|2|COMPLETED|gres/gpu=1\n" for i in range(150))
    with pytest.raises(TraceErrors) as info:
        parse_sacct(body, "many.txt")
    assert len(info.value.errors) == 100 and info.value.more == 50


# ---- json --------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [job_22_05, job_newer], ids=["22.05", "later"])
def test_json_of_either_time_shape(make):
    text = export(make(10, "train-a", 2, T0, T0 + 5, T0 + 3605),
                  make(11, "bert-x", 1, T0 + 60, 0, 0, state="PENDING"),
                  make(12, "bert-y", 4, T0 + 90, 0, T0 + 100, state="CANCELLED"),
                  make(16, "gone", 2, T0 + 95, T0 + 100, T0 + 100, state="CANCELLED"),
                  make(13, "cpu", 0, T0 + 100, T0 + 100, T0 + 700),
                  make(14, "big", 8, T0 + 120, T0 + 200, T0 + 7400, state="TIMEOUT"),
                  make(15, "now", 1, T0 + 130, T0 + 200, 0, state="RUNNING"))
    trace = parse_sacct(text, "site.json")
    assert trace.form == "json" and trace.gpu_field == JSON_GPU_FIELD
    assert [(j.name, j.trace_gpus, j.trace_duration, j.arrival) for j in trace.jobs] == [
        ("sacct-10", 2, 3600.0, 0.0), ("sacct-14", 8, 7200.0, 120.0)]
    assert trace.jobs[1].extra["state"] == "TIMEOUT"
    assert trace.left_out == {NEVER_STARTED: ("11", "12", "16"), NOT_ENDED: ("15",),
                              NO_GPUS: ("13",)}
    assert trace.steps == 0                              # steps nested in their job, unread


def test_json_without_tres_allocations_names_the_field():
    job = job_22_05(1, "a", 2, T0, T0 + 1, T0 + 100)
    del job["tres"]
    with pytest.raises(InputError) as info:
        parse_sacct(export(job), "notres.json")
    assert (info.value.source, info.value.field) == ("notres.json", "tres.allocated")


def test_json_whose_allocations_hold_no_gpu_says_the_accounting_records_none():
    with pytest.raises(InputError) as info:
        parse_sacct(export(job_22_05(1, "a", 0, T0, T0 + 1, T0 + 100)), "cpu.json")
    assert info.value.field == "tres.allocated"
    assert "AccountingStorageTRES=gres/gpu" in info.value.reason


@pytest.mark.parametrize("edit,field", [
    (lambda j: j["time"].update(submission=0), "time.submission"),
    (lambda j: j["time"].update(start="soon"), "time.start"),
    (lambda j: j["tres"]["allocated"][-1].update(count=1.5), "tres.allocated"),
    (lambda j: j.update(job_id="x"), "job_id"),
])
def test_bad_json_records_name_the_job_and_field(edit, field):
    job = job_22_05(7, "a", 2, T0, T0 + 1, T0 + 100)
    edit(job)
    with pytest.raises(InputError) as info:
        parse_sacct(export(job), "bad.json")
    assert (info.value.source, info.value.field) == ("bad.json", field)
    assert info.value.element.startswith("jobs[0]")


@pytest.mark.parametrize("text,reason", [
    ("{not json", "not JSON"),
    ('{"meta": {}}', "no top-level 'jobs' list"),
])
def test_what_is_not_sacct_json(text, reason):
    with pytest.raises(InputError, match=reason):
        parse_sacct(text, "x.json")


def test_a_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_sacct(tmp_path / "none.txt")


# ---- real exports ------------------------------------------------------------------------
# recorded on the local Slurm 22.05.8 cluster (slurmdbd, AccountingStorageTRES=gres/gpu) by
# tests/fabric/slurm/test_slurm_site_cluster.py's sacct test: jobs 1-3 ran with 2, 1 and 4
# GPUs, 4 without GPUs, 5 waits for its begin time, 6 was cancelled while held

@pytest.mark.parametrize("name,form,steps", [("sacct-22.05.json", "json", 0),
                                             ("sacct-22.05-parsable2.txt", "parsable2", 4)])
def test_real_22_05_exports(name, form, steps):
    from support.paths import TEST_DATA

    trace = load_sacct(TEST_DATA / "slurm" / name)
    assert (trace.form, trace.steps) == (form, steps)
    assert [(j.name, j.trace_gpus, j.extra["job_name"]) for j in trace.jobs] == [
        ("sacct-1", 2, "trace-two"), ("sacct-2", 1, "trace-one"), ("sacct-3", 4, "trace-four")]
    assert [j.trace_duration for j in trace.jobs] == [3.0, 3.0, 3.0]
    assert trace.left_out == {NEVER_STARTED: ("5", "6"), NO_GPUS: ("4",)}
