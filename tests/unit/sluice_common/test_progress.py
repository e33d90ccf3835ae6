"""Estimates before a run, the live status during it, and progress that stays quiet off
a terminal."""

from __future__ import annotations

import io

from job_scheduler.core.estimator import Estimator, nominal_bandwidth
from sluice_common.jobspec import load_jobs, parse_jobs
from end_to_end.estimate import WARN_AFTER_S, describe, estimate_run
from sluice_common.progress import LiveStatus, count_bar
from end_to_end.run_status import RunningJob, eta_s, remaining_s, status_line
from topologies import load_topology

from support.paths import REPO as ROOT
TOPO = load_topology("two-rack")
EST = Estimator(nominal_bw_mbps=nominal_bandwidth(TOPO))


def test_estimate_gives_every_job_its_c_n_and_a_makespan():
    jobs = load_jobs(ROOT / "examples/jobs/layers.yaml")
    est = estimate_run(jobs, TOPO, EST)
    assert [j.name for j in est.jobs] == sorted(j.name for j in jobs)
    for j in est.jobs:
        spec = next(s for s in jobs if s.name == j.name)
        assert 1 <= j.gpus <= spec.max_gpus and j.c_n_s > 0
        assert j.finish_s >= spec.arrival + j.c_n_s - 1e-6
    assert est.makespan_s == max(j.finish_s for j in est.jobs)


def test_batches_override_scales_the_estimate():
    jobs = load_jobs(ROOT / "examples/jobs/layers.yaml")
    full, short = estimate_run(jobs, TOPO, EST), estimate_run(jobs, TOPO, EST, batches=2)
    assert all(s.c_n_s < f.c_n_s for s, f in zip(short.jobs, full.jobs))


def test_a_long_job_is_warned_about():
    big = parse_jobs({"jobs": [{"name": "huge", "model": "vgg16", "dataset_size": 10_000_000,
                                "epochs": 5, "batch_size": 32, "max_gpus": 2}]}, "x")
    lines = describe(estimate_run(big, TOPO, EST))
    assert lines[0].startswith("estimate from C(n)")
    assert any(l.startswith("warning: job 'huge'") for l in lines), lines
    small = load_jobs(ROOT / "examples/jobs/layers.yaml")
    assert not any("warning" in l for l in describe(estimate_run(small, TOPO, EST)))
    assert WARN_AFTER_S == 600


def test_remaining_uses_measured_rate_once_batches_are_done():
    before = RunningJob(started=10, c_n_s=100, batches=50, done_batches=0)
    assert remaining_s(before, now=40) == 70
    after = RunningJob(started=10, c_n_s=100, batches=50, done_batches=10)
    assert remaining_s(after, now=40) == 30 * 40 / 10
    assert eta_s(40, [before, after], [60, 60], parallel=2) == 120 + 60


def test_status_line_says_counts_elapsed_and_eta():
    line = status_line(75, pending=1, queued=2, running=[RunningJob(0, 1, 1, 0)], done=3,
                       total=7, eta=3725)
    assert line == ("jobs: 3/7 done, 1 running, 2 queued, 1 not arrived | elapsed 1:15 | "
                    "ETA ~1:02:05 (from C(n))")


def test_progress_is_quiet_off_a_terminal():
    stream = io.StringIO()
    bar = count_bar("x", stream=stream)
    for i in range(11):
        bar(i, 10)
    with LiveStatus(stream) as status:
        status.update("hello")
        status.print("line")
        assert not status.enabled
    assert stream.getvalue() == ""
