"""Suspend/resume of real PS jobs at a batch boundary (ps_runtime.checkpoint): a suspended
and resumed job ends where an uninterrupted one does; the decision to stop is the same
on every worker; bad --suspend-at / --resume input is refused before anything starts."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from sluice_common.jobspec import JobSpec
from ps_runtime import checkpoint
from ps_runtime.launcher import PSJob, WorkerOptions
from ps_runtime.plan import HostPlan
from ps_runtime.ports import free_port_block
from ps_runtime.runners import LocalRunner
from sluice.cli import main as sluice_main

SMALL = JobSpec(name="ck-small", model="smallcnn", dataset_size=4096, epochs=1, batch_size=16,
                max_gpus=2)
RES = JobSpec(name="ck-res", model="resnet18", dataset_size=64, epochs=1, batch_size=4,
              max_gpus=2)


def _job(spec, out: Path, batches: int, workers: int = 2, **options) -> PSJob:
    return PSJob(spec, HostPlan.loopback(1, workers), LocalRunner(), out, batches=batches,
                 base_port=free_port_block(), options=WorkerOptions(threads=1, **options))


def _run(job: PSJob, timeout: float = 180):
    with job:
        job.start()
        return job.wait(timeout=timeout)


def _checksums(out: Path, workers: int) -> list[str]:
    return [next(line for line in (out / f"worker{j}.log").read_text().splitlines()
                 if line.startswith("weights_checksum")) for j in range(workers)]


# ---- pure parts ------------------------------------------------------------------------

def test_manifest_round_trip_and_errors_name_the_file(tmp_path):
    m = checkpoint.Manifest(job="a", model="resnet18", compute="torch", batch=3, batches=10,
                            workers=2, saved_at=1.0)
    checkpoint.write_manifest(tmp_path, m)
    assert checkpoint.read_manifest(tmp_path) == m and not m.finished
    with pytest.raises(ValueError, match="no checkpoint"):
        checkpoint.read_manifest(tmp_path / "missing")
    (tmp_path / "manifest.json").write_text(json.dumps({**m.__dict__, "batch": 0}))
    with pytest.raises(ValueError, match="manifest.json"):
        checkpoint.read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(ValueError, match="unreadable"):
        checkpoint.read_manifest(tmp_path)


def test_resumed_workers_load_a_saved_replica():
    assert [checkpoint.source_worker(j, 2) for j in range(4)] == [0, 1, 0, 1]
    assert [checkpoint.source_worker(j, 3) for j in range(2)] == [0, 1]


# ---- real jobs on loopback -------------------------------------------------------------

def test_torch_suspend_and_resume_ends_bitwise_equal_to_a_straight_run(tmp_path):
    """Two workers (a two-term float sum on the server is exact whatever the arrival
    order), fixed seeds, CPU: the parameters, momentum, batch-norm buffers and RNG are
    saved exactly, so the resumed job's final weights are bit for bit the straight run's."""
    straight = _run(_job(SMALL, tmp_path / "straight", 9))
    ckpt = tmp_path / "susp" / "checkpoint"
    first = _job(SMALL, tmp_path / "susp", 9, checkpoint_dir=str(ckpt), suspend_at=4)
    part1 = _run(first)
    assert first.suspended_batch() == 4
    assert all(code == 0 for code in part1.returncodes.values())
    assert {w: [r.batch for r in recs] for w, recs in part1.batches.items()} == {
        0: [1, 2, 3, 4], 1: [1, 2, 3, 4]}
    m = checkpoint.read_manifest(ckpt)
    assert (m.batch, m.batches, m.workers, m.compute) == (4, 9, 2, "torch")
    second = _job(SMALL, tmp_path / "resumed", 9, resume_from=str(ckpt))
    part2 = _run(second)
    assert {w: [r.batch for r in recs] for w, recs in part2.batches.items()} == {
        0: list(range(5, 10)), 1: list(range(5, 10))}
    assert second.suspended_batch() is None
    want = _checksums(tmp_path / "straight", 2)
    assert _checksums(tmp_path / "resumed", 2) == want
    assert _checksums(tmp_path / "susp", 2)[0] != want[0]        # it did stop early
    # The losses of the resumed batches are the straight run's too (same data, same state).
    for w in (0, 1):
        assert [r.loss for r in part2.batches[w]] == [r.loss for r in straight.batches[w][4:]]


def test_a_request_stops_every_emulated_worker_after_the_same_batch_and_resume_changes_size(tmp_path):
    """The on-demand path (what sluice run uses): the request file appears while the job
    runs; every worker stops after one and the same batch; the job resumes on 1 worker
    instead of 2 and runs exactly the remaining batches."""
    ckpt = tmp_path / "a" / "checkpoint"
    job = _job(RES, tmp_path / "a", 400, compute="emulated", compute_s=0.02,
               bytes_per_batch=4096, checkpoint_dir=str(ckpt))
    with job:
        job.start()
        # ask once the first batches are done (the workers are busy training)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "batch 3 " not in (tmp_path / "a" / "worker1.log").read_text():
            time.sleep(0.05)
        job.request_suspend()
        result = job.wait(timeout=120)
    stopped = job.suspended_batch()
    assert stopped is not None and 3 <= stopped < 400
    assert [recs[-1].batch for recs in result.batches.values()] == [stopped, stopped]
    assert not (ckpt / checkpoint.REQUEST).exists()        # consumed
    again = _job(RES, tmp_path / "b", 400, workers=1, compute="emulated", compute_s=0.0,
                 bytes_per_batch=4096, resume_from=str(ckpt))
    rest = _run(again)
    assert [r.batch for r in rest.batches[0]] == list(range(stopped + 1, 401))
    # worker 0's state carried the model's bytes (here the given 4096 per batch) twice:
    # parameters and momentum
    assert (ckpt / "worker0.state").stat().st_size == 2 * 4096


def test_train_command_refuses_bad_suspend_and_resume_input(tmp_path, capsys):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: a, model: smallcnn, dataset_size: 64, epochs: 1, "
                    "batch_size: 16, max_gpus: 2}\n")
    base = ["train", str(jobs), "--job", "a", "--compute", "emulated", "--batches", "10"]
    assert sluice_main(base + ["--resume", str(tmp_path / "nothing")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert sluice_main(base + ["--suspend-at", "10", "--out", str(tmp_path / "o")]) == 2
    assert "--suspend-at" in capsys.readouterr().err
    checkpoint.write_manifest(tmp_path / "c", checkpoint.Manifest(
        job="other", model="smallcnn", compute="emulated", batch=2, batches=10, workers=2,
        saved_at=0.0))
    assert sluice_main(base + ["--resume", str(tmp_path / "c")]) == 2
    assert "job 'other'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
