"""Workloads: generated Proteus scenarios, the Tiresias and Philly traces, job files."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from sluice_common.models import MODELS
from job_scheduler.simulation.workloads import (BIG_DATA, MIXED_MAX_GPUS, PAPER_N, SCENARIOS,
                                                SMALL_DATA, load_workload)
from job_scheduler.simulation.trace_assumptions import philly_model
from sluice_common.errors import InputError
from job_scheduler.simulation.workloads import SHARED_WORKLOADS
from support.paths import REPO

SHARED = SHARED_WORKLOADS
TIRESIAS = SHARED / "tiresias_60_job.csv"
PHILLY = SHARED / "philly.csv"
EXAMPLES = REPO / "examples" / "jobs"


# ---- generated scenarios --------------------------------------------------------------------

@pytest.mark.parametrize("name", SCENARIOS)
def test_scenarios_follow_their_parameters(name):
    jobs = load_workload(name)
    assert len(jobs) == 100 and len({j.name for j in jobs}) == 100
    assert {j.model for j in jobs} <= {"vgg16", "alexnet", "googlenet", "resnet18"}
    big = [j for j in jobs if j.extra["data"] == "big"]
    assert len(big) == (80 if "-big-" in name else 20)
    for j in jobs:
        lo, hi = BIG_DATA if j.extra["data"] == "big" else SMALL_DATA
        assert lo <= j.dataset_size <= hi and 1 <= j.epochs <= 3
        assert j.batch_size in (32, 64) and j.max_gpus == PAPER_N
    arrivals = [j.arrival for j in jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    if name.endswith("concentrated"):       # bursts: most gaps tiny, a few long
        assert statistics.median(gaps) < 15 and max(gaps) > 1000
    else:                                   # Poisson with mean 120 s
        assert 60 < statistics.mean(gaps) < 200 and max(gaps) < 1000


@pytest.mark.parametrize("name", SCENARIOS)
def test_mixed_caps_change_only_max_gpus(name):
    paper = load_workload(name, seed=2)
    mixed = load_workload(name, seed=2, caps="mixed")
    assert [replace(j, max_gpus=0) for j in paper] == [replace(j, max_gpus=0) for j in mixed]
    caps = [j.max_gpus for j in mixed]
    assert set(caps) <= set(MIXED_MAX_GPUS) and len(set(caps)) == len(MIXED_MAX_GPUS)


def test_unknown_caps_is_an_input_error():
    with pytest.raises(InputError, match="caps"):
        load_workload("proteus-small-dispersed", caps="huge")


def test_scenarios_are_reproducible_and_seeded():
    a = load_workload("proteus-small-dispersed", seed=3)
    assert a == load_workload("proteus-small-dispersed", seed=3)
    assert a != load_workload("proteus-small-dispersed", seed=4)
    assert len(load_workload("proteus-big-concentrated", jobs=7)) == 7


# ---- Tiresias --------------------------------------------------------------------------------

def test_tiresias_trace():
    jobs = load_workload(TIRESIAS, trace_format="tiresias")
    assert len(jobs) == 60
    first = jobs[0]
    assert (first.name, first.model, first.trace_gpus, first.max_gpus, first.trace_duration,
            first.arrival) == ("tiresias-0", "vgg19", 1, 1, 164.0, 0.0)
    assert first.dataset_size == 606 * 32 * 1
    assert {j.model for j in jobs} <= set(MODELS)
    assert "inception_v3" in {j.model for j in jobs}
    assert {j.trace_gpus for j in jobs} <= {1, 2, 4, 8}
    assert len(load_workload(TIRESIAS, trace_format="tiresias", jobs=5)) == 5


# ---- Philly ----------------------------------------------------------------------------------

def test_philly_trace_loads_all_rows():
    jobs = load_workload(PHILLY, trace_format="philly")
    assert len(jobs) == 82_247                       # data rows (82,248 lines with header)
    assert jobs[0].arrival == 0 and all(j.arrival >= 0 for j in jobs)
    assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs)
    assert all(j.trace_gpus == j.max_gpus >= 1 and j.trace_duration > 0 for j in jobs)
    # line 2 of the file: 2017-10-09 07:01:55, 66 s, 1 GPU -> resnet18 (< 1 GPU-hour)
    line2 = next(j for j in jobs if j.name == "philly-2")
    assert (line2.model, line2.trace_duration, line2.extra["cluster"]) == ("resnet18", 66, "11cb48")
    assert {j.model for j in jobs} == {"resnet18", "googlenet", "alexnet", "vgg16"}
    head = load_workload(PHILLY, trace_format="philly", jobs=100)
    assert len(head) == 100 and head[0].arrival == 0
    assert [j.name for j in head] == [j.name for j in jobs[:100]]


def test_philly_model_rule():
    assert philly_model(3599) == "resnet18"
    assert philly_model(3600) == "googlenet"
    assert philly_model(36_000 * 9.99) == "alexnet"
    assert philly_model(360_000) == "vgg16"


# ---- malformed traces --------------------------------------------------------------------------

TIRESIAS_HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


@pytest.mark.parametrize("fmt, header, rows, line, field", [
    ("tiresias", TIRESIAS_HEADER, ["0,1,0,606,vgg19,164,30", "1,two,30,133,vgg11,147,23"], 3,
     "num_gpu"),
    ("tiresias", TIRESIAS_HEADER, ["0,1,0,606,lenet,164,30"], 2, "model_name"),
    ("tiresias", TIRESIAS_HEADER, ["0,1,0,606,vgg19,0,30"], 2, "duration"),
    ("tiresias", TIRESIAS_HEADER, ["0,1,-5,606,vgg19,10,30"], 2, "submit_time"),
    ("tiresias", TIRESIAS_HEADER, ["0,1.5,0,606,vgg19,10,30"], 2, "num_gpu"),
    ("tiresias", TIRESIAS_HEADER, ["0,1,0,606,vgg19,10,30", "0,1,0,606,vgg19,10,30"], 3,
     "job_id"),
    ("tiresias", TIRESIAS_HEADER, ["0,1,0,606,vgg19,10"], 2, None),           # short row
    ("philly", PHILLY_HEADER, ["2017-10-09 07:01:55,66.0,1,66.0,a",
                               "2017-10-09 07:01:55,66.0,0,66.0,a"], 3, "num_gpus"),
    ("philly", PHILLY_HEADER, ["yesterday,66.0,1,66.0,a"], 2, "timestamp"),
    ("philly", PHILLY_HEADER, ["2017-10-09 07:01:55,nan,1,66.0,a"], 2, "duration"),
    ("philly", PHILLY_HEADER, ["2017-10-09 07:01:55,66.0,1,66.0,a,extra"], 2, None),
    ("philly", "timestamp,duration\n", ["2017-10-09 07:01:55,66.0"], 1, "num_gpus"),
])
def test_malformed_rows_name_file_and_line(tmp_path, fmt, header, rows, line, field):
    path = tmp_path / "trace.csv"
    path.write_text(header + "\n".join(rows) + "\n")
    with pytest.raises(InputError) as info:
        load_workload(path, trace_format=fmt)
    err = info.value
    assert err.source == str(path) and err.element == f"line {line}" and err.field == field


def test_empty_and_missing_traces(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text(PHILLY_HEADER)
    with pytest.raises(InputError, match="no jobs"):
        load_workload(empty, trace_format="philly")
    with pytest.raises(InputError, match="cannot read"):
        load_workload(tmp_path / "none.csv", trace_format="tiresias")


# ---- job files and bad arguments -------------------------------------------------------------

def test_job_file_and_bad_arguments(tmp_path):
    jobs = load_workload(EXAMPLES / "mixed.yaml")
    assert len(jobs) == 6 and [j.arrival for j in jobs] == sorted(j.arrival for j in jobs)
    assert len(load_workload(EXAMPLES / "mixed.yaml", jobs=2)) == 2
    with pytest.raises(InputError, match="nor a built-in workload"):
        load_workload("proteus-huge-dispersed")
    with pytest.raises(InputError, match="unknown trace format"):
        load_workload(TIRESIAS, trace_format="borg")
    with pytest.raises(InputError):
        load_workload("proteus-small-dispersed", jobs=0)


def test_bursty_traces_are_seeded_bursty_and_trace_shaped():
    from job_scheduler.simulation.bursty import BURSTY_JOBS
    a = load_workload("bursty-heavy", seed=1)
    assert a == load_workload("bursty-heavy", seed=1) != load_workload("bursty-heavy", seed=2)
    assert len(a) == BURSTY_JOBS and all(j.trace_gpus in (1, 2, 4, 8) for j in a)
    assert all(j.max_gpus == j.trace_gpus and 60 <= j.trace_duration <= 36000 for j in a)
    gaps = sorted(b.arrival - x.arrival for x, b in zip(a, a[1:]))
    # bursts: most gaps are short (inside a burst, mean 10 s), a few are long
    assert gaps[len(gaps) // 2] < 30 and gaps[-1] > 1000
    # offered load = requested GPU-seconds / span of arrivals / 16 GPUs, as named
    def load(js):
        return sum(j.trace_gpus * j.trace_duration for j in js) / (js[-1].arrival - js[0].arrival) / 16
    assert load(load_workload("bursty-heavy")) == pytest.approx(1.0, rel=0.01)
    assert load(load_workload("bursty-moderate", seed=3)) == pytest.approx(0.7, rel=0.01)


def test_trace_caps_paper_raises_max_gpus_only_for_trace_jobs():
    jobs = load_workload("bursty-moderate", jobs=30, trace_caps="paper")
    assert all(j.max_gpus == max(j.trace_gpus, 8) for j in jobs)
    with pytest.raises(InputError):
        load_workload("bursty-moderate", trace_caps="nope")


# ---- $SLUICE_WORKLOADS -------------------------------------------------------------------------

TINY_TIRESIAS = ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                 "0,1,0,606,vgg19,164,30\n1,2,30,133,vgg11,147,23\n")


def test_a_file_name_not_found_here_is_looked_up_in_SLUICE_WORKLOADS(tmp_path, monkeypatch):
    folder, here = tmp_path / "traces", tmp_path / "here"
    folder.mkdir()
    here.mkdir()
    (folder / "tiny.csv").write_text(TINY_TIRESIAS)
    monkeypatch.chdir(here)
    monkeypatch.setenv("SLUICE_WORKLOADS", str(folder))
    jobs = load_workload("tiny.csv")                      # told a Tiresias trace by its header
    assert [j.name for j in jobs] == ["tiresias-0", "tiresias-1"]
    assert len(load_workload("tiny.csv", trace_format="tiresias")) == 2
    (here / "tiny.csv").write_text(TINY_TIRESIAS.splitlines(keepends=True)[0]
                                   + TINY_TIRESIAS.splitlines(keepends=True)[1])
    assert len(load_workload("tiny.csv")) == 1            # the file here comes first


def test_a_missing_workload_names_both_places(tmp_path, monkeypatch):
    folder = tmp_path / "traces"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLUICE_WORKLOADS", str(folder))
    for trace_format in (None, "tiresias"):
        with pytest.raises(InputError) as err:
            load_workload("absent.csv", trace_format=trace_format)
        text = err.value.format()
        assert str(tmp_path / "absent.csv") in text and str(folder) in text, text
        assert "$SLUICE_WORKLOADS" in text
