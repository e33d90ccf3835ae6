"""Trace CSVs with every error at once (hypothesis): a Tiresias trace with any mix of
good rows and rows broken in any set of columns is refused with exactly one error per
broken (line, column), each naming the file; a good trace loads every row; arbitrary
bytes in either format give an InputError, never another exception."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from job_scheduler.simulation.trace_errors import TraceErrors
from job_scheduler.simulation.workloads import load_workload
from sluice_common.errors import InputError

HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval"
GOOD = {"num_gpu": "2", "submit_time": "30", "iterations": "100", "model_name": "vgg19",
        "duration": "50"}
BAD = {"num_gpu": ["two", "0", "1.5", "", "nan"], "submit_time": ["-5", "x", "inf"],
       "iterations": ["0", "abc", "2.5"], "model_name": ["lenet", ""],
       "duration": ["0", "-1", "nan", ""]}
ROW = st.dictionaries(st.sampled_from(sorted(BAD)), st.integers(0, 4), max_size=5)
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(rows=st.lists(ROW, min_size=1, max_size=12))
def test_every_broken_cell_is_reported_once(tmp_path, rows):
    path = tmp_path / "trace.csv"
    lines, expected = [HEADER], set()
    for i, broken in enumerate(rows):
        cells = dict(GOOD)
        for column, k in broken.items():
            cells[column] = BAD[column][k % len(BAD[column])]
            expected.add((f"line {i + 2}", column))
        lines.append(",".join([str(i), cells["num_gpu"], cells["submit_time"],
                               cells["iterations"], cells["model_name"], cells["duration"],
                               "10"]))
    path.write_text("\n".join(lines) + "\n")
    if not expected:
        assert len(load_workload(path, trace_format="tiresias")) == len(rows)
        return
    with pytest.raises(TraceErrors) as info:
        load_workload(path, trace_format="tiresias")
    errors = info.value.errors
    assert {(e.element, e.field) for e in errors} == expected
    assert len(errors) == len(expected)
    assert all(e.source == str(path) for e in errors)
    text = str(info.value)
    assert all(f"{el}: field '{f}'" in text for el, f in expected)


@FUZZ
@given(data=st.binary(max_size=400), fmt=st.sampled_from(["tiresias", "philly"]),
       header=st.booleans())
def test_arbitrary_bytes_are_an_input_error(tmp_path, data, fmt, header):
    path = tmp_path / "trace.csv"
    head = {"tiresias": HEADER, "philly": "timestamp,duration,num_gpus,gpu_time,cluster"}[fmt]
    path.write_bytes((head.encode() + b"\n" if header else b"") + data)
    try:
        jobs = load_workload(path, trace_format=fmt)
    except InputError as err:
        assert str(path) in str(err)
    else:
        assert jobs and all(j.max_gpus >= 1 and j.trace_duration > 0 for j in jobs)


def test_a_trace_wrong_everywhere_is_cut_at_100_errors(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "\n" + "\n".join(f"{i},x,x,x,lenet,x,1" for i in range(50)))
    with pytest.raises(TraceErrors) as info:
        load_workload(path, trace_format="tiresias")
    assert len(info.value.errors) == 100 and info.value.more == 150
    assert "150 more errors (250 in all)" in str(info.value)
