"""The PS data path: ps-lite settings, zero-copy flat buckets, overlap with backward."""

from __future__ import annotations

import dataclasses

import pytest

from ps_runtime.datapath import BIGARRAY_BOUND, ps_env
from ps_runtime.launcher import PSJob, WorkerOptions
from ps_runtime.plan import HostPlan
from ps_runtime.runners import LocalRunner
from ps_runtime.worker import STAGES
from ps_runtime.ports import free_port_block as free_base
from support.ps_jobs import SMALL
from topologies import load_topology


def test_loopback_jobs_use_ipc_and_fabric_jobs_tcp():
    assert HostPlan.loopback(2, 2).single_host
    fabric = HostPlan.on_hosts(load_topology("two-rack"), ["h1"], ["h1"])
    assert not fabric.single_host          # Mininet hosts: traffic must cross the switches
    assert ps_env(True) == {"MXNET_KVSTORE_BIGARRAY_BOUND": str(BIGARRAY_BOUND), "DMLC_LOCAL": "1"}
    assert "DMLC_LOCAL" not in ps_env(False)
    # Every bucket of the worker's default size is split over all servers.
    assert WorkerOptions().bucket_mb * 2 ** 20 / 4 >= BIGARRAY_BOUND


def _run(tmp_path, overlap: bool, servers: int, batches: int = 6):
    job = PSJob(dataclasses.replace(SMALL, name=f"dp-{overlap}"), HostPlan.loopback(servers, 1),
                LocalRunner(), tmp_path, batches=batches, base_port=free_base(),
                options=WorkerOptions(threads=1, overlap=overlap, device="cpu",
                                      bucket_mb=0.5))
    with job:
        job.start()
        result = job.wait(timeout=120)
    lines = [l for l in (tmp_path / "worker0.log").read_text().splitlines()
             if l.startswith(("batch ", "weights_checksum"))]
    return result, lines


def test_overlapped_and_sharded_sync_trains_exactly_like_the_plain_one(tmp_path):
    """Pushing buckets from the backward hooks, over 3 servers, gives bit-identical
    losses and weights to pushing everything after backward through one server."""
    plain, plain_lines = _run(tmp_path / "plain", overlap=False, servers=1)
    fast, fast_lines = _run(tmp_path / "fast", overlap=True, servers=3)
    assert [r.loss for r in fast.batches[0]] == [r.loss for r in plain.batches[0]]
    assert fast_lines[-1] == plain_lines[-1] and fast_lines[-1].startswith("weights_checksum")
    for line in fast_lines[:-1]:
        fields = line.split()
        names = fields[4::2]
        assert names == ["time_s", "comm_s"] + [f"{s}_s" for s in STAGES], line
        values = dict(zip(names, map(float, fields[5::2])))
        assert all(v >= 0 for v in values.values())
        assert values["compute_s"] <= values["time_s"]


def test_train_without_mxnet_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    import importlib.util

    from sluice.cli import main as sluice_main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mxnet" else real(name, *a))
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: t, model: smallcnn, dataset_size: 64, epochs: 1, "
                    "batch_size: 8, max_gpus: 1}\n")
    assert sluice_main(["train", str(jobs), "--job", "t", "--out", str(tmp_path / "o")]) == 1
    assert "pip install --no-deps mxnet==1.9.1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()       # nothing started
