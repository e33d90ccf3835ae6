"""The demo's workload: drawn with a seed from the Philly distributions the repo carries,
scaled to the fabric (GPU counts 2..8), to seconds (log-linear) and to an offered load."""

import math
from collections import Counter

import pytest

from end_to_end.workload_draw import (DEMO_SEED, DrawSpec, arrivals, at_quantile, dataset_for,
                                      draw_raw, draw_workload, jobs_yaml, load_distributions,
                                      offered_load, scaled_duration)
from sluice_common.jobspec import JobSpec


def linear_seconds(job: JobSpec, n: int) -> float:
    """A stand-in estimator: 2 s start-up + 0.01 s per batch of each worker."""
    return 2.0 + 0.01 * math.ceil(job.dataset_size / (job.batch_size * n))


def test_the_committed_distributions_are_philly_s():
    d = load_distributions()
    assert sum(d["gpu_counts"].values()) == 82247          # the trace's rows
    assert d["gpu_counts"][1] == 76627 and d["gpu_counts"][8] == 1643
    for table in (*d["durations"].values(), d["all_durations"], d["interarrivals"]):
        assert len(table) == 101 and table == sorted(table)
    # big jobs are long in Philly: the medians grow with the GPU class
    assert d["durations"][1][50] < d["durations"][4][50] < d["durations"][8][50]


def test_quantile_interpolation_and_the_log_time_scale():
    table = [float(p) for p in range(101)]
    assert at_quantile(table, 0.505) == pytest.approx(50.5)
    assert at_quantile(table, 1.0) == 100.0 and at_quantile(table, -1) == 0.0
    all_d = [1.0] + [10.0 * 10 ** (k / 49) for k in range(99)] + [1e9]   # p1 10 s, p99 1000 s
    assert scaled_duration(10.0, all_d, (3.0, 30.0)) == pytest.approx(3.0)
    assert scaled_duration(1000.0, all_d, (3.0, 30.0)) == pytest.approx(30.0)
    assert scaled_duration(100.0, all_d, (3.0, 30.0)) == pytest.approx(math.sqrt(90))
    assert scaled_duration(1e7, all_d, (3.0, 30.0)) == 30.0          # clipped


def test_a_seed_gives_one_workload_and_another_seed_another():
    a = draw_workload(linear_seconds, 16, DEMO_SEED).jobs
    assert a == draw_workload(linear_seconds, 16, DEMO_SEED).jobs
    assert a != draw_workload(linear_seconds, 16, DEMO_SEED + 1).jobs
    assert len(a) == DrawSpec().jobs and a[0].arrival == 0.0
    assert [j.arrival for j in a] == sorted(j.arrival for j in a)


def test_requests_come_from_philly_s_distributed_jobs_capped_at_the_fabric():
    spec = DrawSpec(jobs=4000)
    draws = draw_raw(load_distributions(), 1, spec)
    counts = Counter(d.philly_gpus for d in draws)
    assert min(counts) >= 2 and all(2 <= d.gpus <= 8 for d in draws)
    hist = load_distributions()["gpu_counts"]
    multi = {g: c for g, c in hist.items() if g >= 2}
    for g in (2, 4, 8):                     # frequencies within 3 points of the trace's
        assert abs(counts[g] / len(draws) - multi[g] / sum(multi.values())) < 0.03
    by = {g: [d.seconds for d in draws if d.gpus == g] for g in (2, 8)}
    assert sum(by[8]) / len(by[8]) > sum(by[2]) / len(by[2])     # 8-GPU jobs are longer
    assert all(spec.duration_s[0] <= d.seconds <= spec.duration_s[1] for d in draws)


def test_arrivals_make_the_offered_load():
    spec = DrawSpec(jobs=12, load=0.9)
    draws = draw_raw(load_distributions(), 3, spec)
    times, window = arrivals(draws, 16, spec.load)
    assert times[0] == 0.0 and times == sorted(times) and window > times[-1]
    # the gaps keep their proportions
    gaps = [b - a for a, b in zip(times, times[1:])]
    k = max(range(len(gaps)), key=gaps.__getitem__)
    assert gaps[k] / (window - times[0]) == pytest.approx(draws[k].gap / sum(d.gap for d in draws),
                                                          abs=0.01)
    load = offered_load([(d.gpus, d.seconds) for d in draws], window, 16)
    assert load == pytest.approx(0.9, rel=1e-6)
    w = draw_workload(linear_seconds, 16, 3, spec)
    assert w.load == pytest.approx(0.9, rel=1e-6) and w.describe()["offered_load"] == 0.9


def test_dataset_size_makes_the_estimated_run_last_the_drawn_seconds():
    template = JobSpec(name="x", model="resnet18", dataset_size=1, epochs=1, batch_size=256,
                       max_gpus=4)
    size = dataset_for(linear_seconds, template, 4, 12.0)
    assert size % (256 * 4) == 0
    from dataclasses import replace
    assert linear_seconds(replace(template, dataset_size=size), 4) == pytest.approx(12.0, abs=0.011)


def test_the_workload_file_is_a_job_file_sluice_run_takes(tmp_path):
    from sluice_common.jobspec import load_jobs

    jobs = draw_workload(linear_seconds, 16, DEMO_SEED).jobs
    path = tmp_path / "w.yaml"
    path.write_text(jobs_yaml(jobs, DEMO_SEED))
    again = load_jobs(str(path))
    assert [(j.name, j.model, j.dataset_size, j.max_gpus, j.arrival) for j in again] == \
        [(j.name, j.model, j.dataset_size, j.max_gpus, j.arrival) for j in jobs]
    assert f"seed {DEMO_SEED}" in path.read_text()
