"""The typed options the PS runtime's command lines build from their namespaces:
``sluice train``'s :class:`TrainOptions` (with its :class:`CheckpointOptions`) and a
worker's :class:`WorkerCheckpoint`; their defaults are the parsers', their environment
fallbacks the ones the command lines had, and the functions below them take them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ps_runtime import checkpoint, emulated_state
from ps_runtime.checkpoint import WorkerCheckpoint
from ps_runtime.cli import TrainOptions, train_options
from ps_runtime.emulated_worker import parse_args as emulated_args
from ps_runtime.train_checkpoint import CheckpointOptions, checkpoint_options
from sluice.cli import build_parser
from sluice_common.errors import InputError
from sluice_common.jobspec import JobSpec

SPEC = JobSpec(name="a", model="smallcnn", dataset_size=64, epochs=1, batch_size=16, max_gpus=2)


def _train_namespace(*flags: str):
    parser, _, _, rest = build_parser("train", ["jobs.yaml", "--job", "a", *flags])
    return parser.parse_args(rest)


def test_train_options_defaults_are_the_parsers():
    opts = train_options(_train_namespace(), environ={})
    assert opts == TrainOptions(jobs="jobs.yaml", job="a")
    assert (opts.workers, opts.threads, opts.timeout, opts.compress, opts.compute) == (
        2, 1, 3600.0, "fp16", "auto")
    assert opts.checkpoint == CheckpointOptions() and opts.controller_job is None


def test_train_options_carry_every_flag_given():
    opts = train_options(_train_namespace(
        "--workers", "3", "--worker-gpus", "0,1,2", "--batches", "7", "--quiet",
        "--compress", "none", "--bw-scale", "0.5", "--compute", "emulated",
        "--suspend-at", "4", "--suspendable", "--resume", "/r"), environ={})
    assert (opts.workers, opts.worker_gpus, opts.batches, opts.quiet, opts.compress,
            opts.bw_scale, opts.compute) == (3, "0,1,2", 7, True, "none", 0.5, "emulated")
    assert opts.checkpoint == CheckpointOptions(suspend_at=4, suspendable=True, resume="/r")
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.workers = 4


@pytest.mark.parametrize("env, expected", [({}, None), ({"SLUICE_CONTROLLER_JOB_ID": ""}, None),
                                           ({"SLUICE_CONTROLLER_JOB_ID": "17"}, "17")])
def test_the_controllers_job_id_comes_from_the_environment(env, expected):
    assert train_options(_train_namespace(), environ=env).controller_job == expected


def test_a_workers_checkpoint_is_built_from_its_flags():
    args = emulated_args(["--job", "j", "--worker-index", "1", "--batches", "9",
                          "--compute-s", "0.1", "--bytes-per-batch", "10"])
    from ps_runtime.train_checkpoint import worker_checkpoint_of

    assert worker_checkpoint_of(args) == WorkerCheckpoint(job="j", worker_index=1, batches=9)
    args = emulated_args(["--job", "j", "--worker-index", "0", "--batches", "9", "--model",
                          "resnet18", "--batch-size", "4", "--checkpoint-dir", "/c",
                          "--suspend-at", "3", "--resume", "/r"])
    assert worker_checkpoint_of(args) == WorkerCheckpoint(
        job="j", worker_index=0, batches=9, model="resnet18", checkpoint_dir="/c",
        suspend_at=3, resume="/r")


def test_a_workers_progress_token_falls_back_to_the_environment(monkeypatch):
    flags = ["--job", "j", "--worker-index", "0", "--batches", "1", "--compute-s", "0",
             "--bytes-per-batch", "1"]
    monkeypatch.delenv("SLUICE_PROGRESS_TOKEN", raising=False)
    assert emulated_args(flags).token is None
    monkeypatch.setenv("SLUICE_PROGRESS_TOKEN", "tok")
    assert emulated_args(flags).token == "tok"
    assert emulated_args(flags + ["--token", "given"]).token == "given"


def test_checkpoint_options_take_the_asked_batches_apart_from_the_jobs(tmp_path):
    assert checkpoint_options(CheckpointOptions(), SPEC, 10, "emulated")[0] == 10
    batches, fields = checkpoint_options(CheckpointOptions(suspend_at=4), SPEC, 10, "emulated")
    assert batches == 10 and fields(tmp_path) == {
        "checkpoint_dir": str(tmp_path / "checkpoint"), "suspend_at": 4}
    checkpoint.write_manifest(tmp_path / "c", checkpoint.Manifest(
        job="a", model="smallcnn", compute="emulated", batch=2, batches=12, workers=2,
        saved_at=0.0))
    resume = CheckpointOptions(resume=str(tmp_path / "c"))
    assert checkpoint_options(resume, SPEC, 10, "emulated")[0] == 12
    with pytest.raises(InputError) as err:
        checkpoint_options(resume, SPEC, 10, "emulated", asked_batches=10)
    assert str(err.value).endswith("the checkpoint's job has 12 batches per worker, got 10")
    with pytest.raises(InputError, match=r"must be a batch in 3\.\.11"):
        checkpoint_options(CheckpointOptions(suspend_at=2, resume=str(tmp_path / "c")),
                           SPEC, 10, "emulated")


def test_an_emulated_workers_state_round_trips_and_worker_0_completes_it(tmp_path, monkeypatch):
    exits = []
    monkeypatch.setattr(checkpoint, "exit_now", exits.append)
    monkeypatch.setenv("DMLC_NUM_WORKER", "3")
    ck = WorkerCheckpoint(job="a", worker_index=0, batches=10, model="smallcnn",
                          checkpoint_dir=str(tmp_path))
    emulated_state.save_state(ck, 1000)
    emulated_state.save_state(dataclasses.replace(ck, worker_index=1), 1000)
    assert (tmp_path / "worker0.state").stat().st_size == 2000
    assert (tmp_path / "worker1.state").stat().st_size == 0
    checkpoint.request_suspend(tmp_path)
    checkpoint.finish_suspend(ck, "emulated", 4)
    assert exits == [0] and not (tmp_path / checkpoint.REQUEST).exists()
    saved = json.loads((tmp_path / checkpoint.MANIFEST).read_text())
    assert {k: saved[k] for k in ("job", "model", "compute", "batch", "batches", "workers")} == {
        "job": "a", "model": "smallcnn", "compute": "emulated", "batch": 4, "batches": 10,
        "workers": 3}
    resumed = WorkerCheckpoint(job="a", worker_index=4, batches=10, resume=str(tmp_path))
    assert emulated_state.load_state(resumed) == 4      # worker 4 reads worker 1's (4 % 3)


def test_a_missing_checkpoint_stops_the_worker_naming_it(tmp_path):
    ck = WorkerCheckpoint(job="a", worker_index=2, batches=10, resume=str(tmp_path))
    with pytest.raises(SystemExit, match=r"^worker 2: .*manifest\.json: no checkpoint"):
        checkpoint.resume_manifest(ck)


def test_the_manifests_worker_count_defaults_to_one_without_ps_lites_environment(tmp_path,
                                                                                monkeypatch):
    monkeypatch.setattr(checkpoint, "exit_now", lambda code: None)
    monkeypatch.delenv("DMLC_NUM_WORKER", raising=False)
    checkpoint.finish_suspend(WorkerCheckpoint(job="a", worker_index=0, batches=5,
                                               checkpoint_dir=str(tmp_path)), "torch", 2)
    assert checkpoint.read_manifest(tmp_path).workers == 1
