"""sluice whatif's arithmetic: arrivals scaled to an offered load, and the report."""

from __future__ import annotations

import pytest

from end_to_end.whatif import (arm_metrics, arrival_window, bins_quantile, cross_rack_share,
                               known_error, known_error_lines, multi_host_jobs, offered_load,
                               pair_changes, parse_load, report, scale_to_load)
from job_scheduler.simulation.simulator import simulate
from sluice_common.errors import InputError
from sluice_common.jobspec import JobSpec
from sluice_common.placement import Placement
from support.sim_jobs import CROSS_A, Pinned, job
from topologies import load_topology


def trace_job(name, arrival, gpus, seconds, **extra):
    return JobSpec(name=name, model="resnet18", dataset_size=32 * gpus, epochs=1,
                   batch_size=32, max_gpus=gpus, arrival=arrival, trace_gpus=gpus,
                   trace_duration=seconds, extra=extra)


JOBS = [trace_job("j1", 100.0, 2, 50.0), trace_job("j2", 110.0, 4, 25.0),
        trace_job("j3", 140.0, 1, 100.0)]         # 300 GPU-seconds over a 40 s window


def test_offered_load_is_recorded_gpu_seconds_over_gpus_times_the_arrival_span():
    assert arrival_window(JOBS) == 40.0
    assert offered_load(JOBS, total_gpus=10) == pytest.approx(300 / (10 * 40))


@pytest.mark.parametrize("load", [0.1, 0.5, 0.75, 1.0])
def test_scaling_reaches_the_load_and_keeps_the_arrivals_shape(load):
    scaled, factor = scale_to_load(JOBS, 10, load)
    assert offered_load(scaled, 10) == pytest.approx(load, abs=1e-12)
    assert factor == pytest.approx(0.75 / load)
    assert scaled[0].arrival == 100.0                     # the first arrival stays
    gaps = [b.arrival - a.arrival for a, b in zip(scaled, scaled[1:])]
    assert gaps == pytest.approx([10 * factor, 30 * factor])
    assert [j.trace_duration for j in scaled] == [j.trace_duration for j in JOBS]


def test_recorded_keeps_the_arrivals():
    same, factor = scale_to_load(JOBS, 10, None)
    assert factor == 1.0 and [j.arrival for j in same] == [100.0, 110.0, 140.0]


@pytest.mark.parametrize("jobs", [JOBS[:1], [trace_job("x", 5.0, 1, 1.0),
                                             trace_job("y", 5.0, 2, 1.0)]])
def test_no_arrival_window_cannot_be_scaled(jobs):
    assert offered_load(jobs, 10) is None
    with pytest.raises(InputError) as err:
        scale_to_load(jobs, 10, 0.5, source="t.csv")
    assert err.value.field == "load" and "t.csv" in str(err.value)
    assert "no arrival window" in str(err.value)
    assert scale_to_load(jobs, 10, None)[1] == 1.0        # recorded still runs


def test_a_job_without_a_recorded_duration_has_no_offered_load():
    bare = JobSpec(name="y", model="resnet18", dataset_size=32, epochs=1, batch_size=32,
                   max_gpus=1, arrival=7.0)
    with pytest.raises(InputError) as err:
        offered_load([JOBS[0], bare], 10, source="jobs.yaml")
    assert err.value.field == "trace_duration" and "job 'y'" in str(err.value)


@pytest.mark.parametrize("text,value", [("recorded", None), ("RECORDED", None), ("0.9", 0.9),
                                        ("1", 1.0), ("1e-3", 0.001)])
def test_parse_load(text, value):
    assert parse_load(text) == value


@pytest.mark.parametrize("text", ["0", "-0.5", "1.01", "nan", "inf", "x", ""])
def test_a_load_outside_0_1_or_not_a_number_names_the_field(text):
    with pytest.raises(InputError) as err:
        parse_load(text)
    assert err.value.field == "load" and "(0, 1]" in err.value.reason


def test_the_known_error_is_read_and_said_and_a_missing_record_is_unknown(tmp_path):
    path = tmp_path / "err.yaml"
    path.write_text("judged: '2026-01-01'\ncommit: abc\ndemo: {what: demo arms, comparisons: 4,"
                    " within_bound: 3, cannot_judge: 0, bound_pct: 10.0, error_min_pct: -12.5,"
                    " error_max_pct: 2.0}\n")
    lines = known_error_lines(known_error(path))
    assert len(lines) == 1 and "-12.5 to 2.0 %" in lines[0] and "3 of 4" in lines[0]
    missing = known_error(tmp_path / "none.yaml")
    assert "unknown" in missing and "unknown" in known_error_lines(missing)[0]
    committed = known_error()
    assert {"demo", "heavy_tail"} <= set(committed), committed


def record(hosts, ps, racks):
    return {"placement": {"gpus_by_host": {h: 1 for h in hosts}, "ps_hosts": ps,
                          "racks": racks}}


def test_cross_rack_share_counts_only_jobs_that_span_hosts():
    records = [record(["h1"], ["h1"], ["r1"]),              # one host: not counted
               record(["h1", "h2"], ["h1"], ["r1"]),        # two hosts, one rack
               record(["h1"], ["h5"], ["r1", "r2"]),        # PS in another rack
               record(["h1", "h5"], ["h1"], ["r1", "r2"]),
               {"placement": None}]
    assert cross_rack_share(records) == pytest.approx(2 / 3)
    assert cross_rack_share(records[:1]) == 0.0


def test_bins_quantile_is_time_weighted():
    seconds = [0.0] * 1001
    seconds[0] = 60.0           # idle 60 % of the uplink-time
    seconds[500] = 39.0         # (0.499, 0.5]
    seconds[1000] = 1.0         # full
    assert bins_quantile(seconds, 0.5) == 0.0
    assert bins_quantile(seconds, 0.61) == 0.5
    assert bins_quantile(seconds, 0.99) == 0.5
    assert bins_quantile(seconds, 0.995) == 1.0
    assert bins_quantile([0.0] * 1001, 0.5) == 0.0


def test_the_pairs_compare_average_jct_where_both_arms_ran():
    arms = {"a": {"avg_jct_s": 200.0}, "b": {"avg_jct_s": 150.0}, "c": {"avg_jct_s": 100.0}}
    assert pair_changes(arms) == {"b_vs_a": pytest.approx(-0.25)}
    out = report(arms=arms, load=0.5, load_requested=0.5, load_recorded=0.2, jobs=3,
                 topology="t", total_gpus=8, window_s=1.0, scale=0.4)
    assert out["b_vs_a"] == pytest.approx(-0.25) and "d_vs_c" not in out
    assert report(arms=arms, load=None, load_requested=None, load_recorded=None, jobs=3,
                  topology="t", total_gpus=8, window_s=0.0, scale=1.0)["load_requested"] \
        == "recorded"


def test_arm_metrics_spread_is_that_of_the_job_records():
    jobs = [job("a", m=6000), job("b", m=6000), job("c", m=6000), job("d", arrival=5.0, m=6000)]
    pins = Pinned({"a": CROSS_A, "b": Placement("b", ("h2",), ("h1", "h2")),
                   "c": Placement("c", ("h4",), ("h4",)), "d": Placement("d", ("h4",), ("h2",))})
    result = simulate(load_topology("two-rack"), jobs, pins)
    got = arm_metrics(result, "a", "title")
    records = result.job_records
    assert got["multi_host_jobs"] == multi_host_jobs(records) == 3
    assert got["cross_rack_share"] == cross_rack_share(records) == pytest.approx(2 / 3)
