"""The PS runtime's launch, close and server time per worker, read from a demo run's
per-job records."""

from __future__ import annotations

import json

import pytest

from mininet_tests.calibration import runtime as ro
from sluice.cli import main as sluice_main
from ps_runtime.calibration import launch_and_close, server_per_worker_s


def record(name, start, finish, batches, status="finished", preemptions=0, runs=1,
           hosts=1, gpus=2, mean_iteration_s=0.105, priced_batch_s=0.1):
    """A job's run record: ``batches`` as (end_s, worker, batch, seconds); its run priced
    each of its 10 batches at ``priced_batch_s``."""
    return {"name": name, "start": start, "finish": finish, "status": status,
            "preemptions": preemptions, "gpu_runs": [{}] * runs,
            "iterations": [list(b) for b in batches], "hosts": hosts, "gpus": gpus,
            "batches": 10, "C_n_s": 10 * priced_batch_s, "mean_iteration_s": mean_iteration_s}


def test_launch_counts_from_the_slot_s_decision_and_close_from_the_last_batch():
    # started 0.1 s after the slot at 12 s, first batch (two workers) began at 12.4 s
    rec = record("j", 12.1, 15.0, [(12.9, 0, 1, 0.5), (13.0, 1, 1, 0.55), (14.6, 0, 2, 0.5),
                                   (14.7, 1, 2, 0.5)])
    got = ro.job_overheads(rec, slot_s=1.0)
    assert got.launch_s == pytest.approx(12.4 - 12.0)       # min(12.4, 12.45) - the slot
    assert got.close_s == pytest.approx(15.0 - 14.7)
    # with 5 s slots the same start was decided at 10 s
    assert ro.job_overheads(rec, slot_s=5.0).launch_s == pytest.approx(2.4)


def test_jobs_that_did_not_run_once_to_their_end_are_left_out():
    batches = [(1.5, 0, 1, 0.5)]
    assert ro.job_overheads(record("s", 0.0, 2.0, batches, preemptions=1), 1.0) is None
    assert ro.job_overheads(record("r", 0.0, 2.0, batches, runs=2), 1.0) is None
    assert ro.job_overheads(record("f", 0.0, 2.0, batches, status="failed"), 1.0) is None
    assert ro.job_overheads(record("e", 0.0, 2.0, []), 1.0) is None


def test_the_medians_come_from_every_measurable_job_and_none_is_an_error():
    jobs = [record(f"j{i}", 0.0, 3.0 + i, [(1.0 + i / 10, 0, 1, 0.5), (2.0 + i, 0, 2, 0.5)])
            for i in range(3)] + [record("sus", 0.0, 9.0, [(1.0, 0, 1, 0.5)], preemptions=1)]
    samples = ro.run_overheads({"slot_s": 1.0, "jobs": jobs})
    assert [s.name for s in samples] == ["j0", "j1", "j2"]
    got = ro.summarise(samples)
    # each job's batch took 5 ms more than priced, over its 2 workers
    assert got == {"launch_s": pytest.approx(0.6), "close_s": pytest.approx(1.0), "jobs": 3,
                   "server_per_worker_s": pytest.approx(0.0025), "one_host_jobs": 3}
    with pytest.raises(ValueError, match="nothing to measure"):
        ro.summarise([])
    two_hosts = ro.run_overheads({"slot_s": 1.0, "jobs": [dict(j, hosts=2) for j in jobs]})
    with pytest.raises(ValueError, match="on one host"):
        ro.summarise(two_hosts)
    with pytest.raises(ValueError, match="slot_s"):
        ro.run_overheads({"jobs": jobs})


def test_the_server_s_time_per_worker_is_what_a_one_host_batch_takes_past_its_price():
    rec = record("j", 0.0, 2.0, [(1.5, 0, 1, 0.5)], gpus=4, mean_iteration_s=0.112)
    assert ro.server_per_worker(rec, priced_s=0.0) == pytest.approx(0.003)   # 12 ms / 4
    # a run whose estimator already priced 1 ms per worker: its price holds 4 ms of it
    assert ro.server_per_worker(rec, priced_s=0.001) == pytest.approx(0.004)
    assert ro.server_per_worker(dict(rec, hosts=2), 0.0) is None     # a link's model enters
    assert ro.server_per_worker(dict(rec, C_n_s=None), 0.0) is None
    priced = ro.run_overheads({"slot_s": 1.0, "server_per_worker_s": 0.001, "jobs": [rec]})
    assert priced[0].server_per_worker_s == pytest.approx(0.004)


def test_the_command_reads_run_directories_writes_and_bad_ones_exit_2(tmp_path, capsys):
    import yaml

    run = tmp_path / "run"
    (run / "arm-a").mkdir(parents=True)
    (run / "arm-a" / "report.json").write_text(json.dumps({"slot_s": 1.0, "jobs": [
        record("j", 0.05, 2.5, [(0.8, 0, 1, 0.5), (2.2, 0, 2, 0.5)])]}))
    assert sluice_main(["calibrate", "runtime", str(run)]) == 0
    assert ("launch 0.300 s, close 0.300 s (medians over 1 jobs of 1 runs); server per "
            "worker 2.50 ms a batch (median over the 1 of them on one host)"
            in capsys.readouterr().out)
    out = tmp_path / "overheads.yaml"
    assert ro.calibrate([run], write=True, out=out) == 0
    written = yaml.safe_load(out.read_text())
    assert (written["launch_s"], written["close_s"], written["jobs"]) == (0.3, 0.3, 1)
    assert written["server_per_worker_s"] == pytest.approx(0.0025)
    assert written["provenance"]["command"] == f"sluice calibrate runtime {run} --write"
    before = out.read_text()
    assert ro.calibrate([tmp_path / "nowhere"], write=True, out=out) == 2
    assert "no arm-*/report.json" in capsys.readouterr().err
    (run / "arm-a" / "report.json").write_text("{not json")
    assert ro.calibrate([run], write=True, out=out) == 2
    assert "report.json: cannot be read" in capsys.readouterr().err
    assert out.read_text() == before            # nothing written on bad input


def test_the_package_s_figures_are_the_recorded_ones():
    import yaml

    data = yaml.safe_load(ro.DATA_FILE.read_text())
    launch, close = launch_and_close("emulated")
    assert (launch, close) == (data["launch_s"], data["close_s"])
    assert data["jobs"] > 0 and data["provenance"]["command"].startswith(
        "sluice calibrate runtime")
    # torch builds its model first: its launch is its own start-up
    assert launch_and_close("torch") == (12.0, close)
    assert server_per_worker_s() == data["server_per_worker_s"] > 0
