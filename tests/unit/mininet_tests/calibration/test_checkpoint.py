"""What a suspension's checkpoint costs, read from demo runs' suspensions: their records
and worker 0's logged write and read."""

from __future__ import annotations

import json

import pytest

from mininet_tests.calibration import checkpoint as ck
from ps_runtime.calibration import checkpoint_costs, launch_and_close
from sluice.cli import main as sluice_main


def arm_dir(tmp_path, suspensions=((1000.0, 4.0, 2000.0, 2.0),), close_s=None):
    """One arm's directory: job 'v' suspended after batch 3 (its last batch ended at 10 s,
    its first run's processes exited 5 s later), resumed; per suspension (MB written, s,
    MB read, s) in the logs worker 0 writes."""
    arm = tmp_path / "run" / "arm-d"
    logs = arm / "jobs" / "v"
    logs.mkdir(parents=True)
    preemptions, runs, iterations = [], [], []
    for k, (wmb, ws, rmb, rs) in enumerate(suspensions, start=1):
        batch, end = 3 * k, 10.0 * k
        iterations += [[end, 0, batch, 0.2], [end - 0.01, 1, batch, 0.2]]
        runs.append({"start_s": end - 5, "end_s": end + 5.0})
        preemptions.append({"job": "v", "batch": batch, "why": "sluice"})
        # the K-th run's log: the read after the suspension before it, then its write
        prev = suspensions[k - 2] if k > 1 else None
        (logs / f"worker0.segment{k}.log").write_text(
            ("" if prev is None else f"worker 0: resuming after batch {batch - 3}, read "
             f"{prev[2]:.1f} MB from x in {prev[3]:.3f} s\n")
            + f"worker 0: saved {wmb:.1f} MB of state in {ws:.3f} s\n"
            "worker 1: saved 0.0 MB of state in 0.000 s\n")
    runs.append({"start_s": 99.0, "end_s": 120.0})
    wmb, ws, rmb, rs = suspensions[-1]
    (logs / "worker0.log").write_text(f"worker 0: resuming after batch 3, read {rmb:.1f} MB "
                                      f"from /x/checkpoint-1/worker0.state in {rs:.3f} s\n")
    (arm / "report.json").write_text(json.dumps({
        "slot_s": 1.0, "preemptions": preemptions,
        "jobs": [{"name": "v", "gpu_runs": runs, "iterations": iterations}]}))
    return tmp_path / "run"


def test_each_suspension_gives_its_write_its_hold_and_the_read_after_it(tmp_path):
    run = arm_dir(tmp_path, ((1000.0, 4.0, 2000.0, 2.0), (500.0, 1.0, 1000.0, 4.0)))
    report = json.loads((run / "arm-d" / "report.json").read_text())
    got = ck.run_suspensions(report, run / "arm-d" / "jobs")
    assert got == [ck.Suspension("v", 1000.0, 4.0, 5.0, 2000.0, 2.0),
                   ck.Suspension("v", 500.0, 1.0, 5.0, 1000.0, 4.0)]
    fig = ck.figures(got, close_s=0.5)
    # writes at 250 and 500 MB/s, reads at 1000 and 250; holds 5 s less write and close
    assert fig == {"write_mb_s": 375.0, "read_mb_s": 625.0, "extra_s": pytest.approx(2.0),
                   "suspensions": 2, "resumes": 2}


def test_a_suspension_without_its_logs_is_left_out_and_none_left_is_an_error(tmp_path):
    run = arm_dir(tmp_path)
    (run / "arm-d" / "jobs" / "v" / "worker0.segment1.log").unlink()
    report = json.loads((run / "arm-d" / "report.json").read_text())
    assert ck.run_suspensions(report, run / "arm-d" / "jobs") == []
    with pytest.raises(ValueError, match="nothing to measure"):
        ck.figures([], close_s=0.3)
    not_resumed = [ck.Suspension("v", 100.0, 1.0, 2.0)]
    with pytest.raises(ValueError, match="nothing to measure"):
        ck.figures(not_resumed, close_s=0.3)


def test_the_command_prints_writes_and_bad_input_exits_2_writing_nothing(tmp_path, capsys):
    import yaml

    run = arm_dir(tmp_path)
    assert sluice_main(["calibrate", "checkpoint", str(run)]) == 0
    assert "checkpoint write 250 MB/s, read 1000 MB/s" in capsys.readouterr().out
    out = tmp_path / "costs.yaml"
    assert ck.calibrate([run], write=True, out=out) == 0
    written = yaml.safe_load(out.read_text())
    close_s = launch_and_close("emulated")[1]
    assert written["write_mb_s"] == 250.0 and written["read_mb_s"] == 1000.0
    assert written["extra_s"] == pytest.approx(5.0 - 4.0 - close_s, abs=1e-4)
    assert written["provenance"]["command"] == f"sluice calibrate checkpoint {run} --write"
    before = out.read_text()
    (run / "arm-d" / "jobs" / "v" / "worker0.log").unlink()      # no resume read left
    assert ck.calibrate([run], write=True, out=out) == 2
    assert "nothing to measure" in capsys.readouterr().err
    assert ck.calibrate([tmp_path / "nowhere"], write=True, out=out) == 2
    assert "no arm-*/report.json" in capsys.readouterr().err
    assert out.read_text() == before


def test_the_package_s_costs_are_the_recorded_ones():
    import yaml

    data = yaml.safe_load(ck.DATA_FILE.read_text())
    costs = checkpoint_costs()
    assert (costs.write_mb_s, costs.read_mb_s, costs.extra_s) == (
        data["write_mb_s"], data["read_mb_s"], data["extra_s"])
    assert data["suspensions"] > 0 and data["provenance"]["command"].startswith(
        "sluice calibrate checkpoint")
    # a vgg16 job's 1.1 GB of state: seconds to write, as the demo's runs took
    assert 1.0 < costs.hold_s(1.107e9) < 10.0
