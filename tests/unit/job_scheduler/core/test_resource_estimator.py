"""Liquid's resource estimator: the diminishing-returns rule by hand, the forest on the
shipped measured runs, and its use by `sluice validate` / `submit`."""

from __future__ import annotations

import pytest
import yaml

from job_scheduler.core.gpu_advice import advise, capped_text
from sluice_common.jobspec import JobSpec, parse_jobs_text
from sluice.cli import main
from job_scheduler.core.resource_estimator import (diminishing_point, evaluate, labels, load_runs,
                                                   throughput)


def test_diminishing_point_by_hand():
    # t = 10, x = 1: throughput 1, 20/12 = 1.67, 30/13 = 2.31, 40/14 = 2.86, 50/15 = 3.33;
    # the 5th GPU adds 0.48 < 0.5
    assert throughput(2, 10, 1) == pytest.approx(20 / 12)
    assert diminishing_point(10, 1) == 4
    assert diminishing_point(10, 20) == 1          # exchange dominates: one GPU
    assert diminishing_point(10, 0) == 8           # free exchange: the whole server


def test_labels_of_a_measured_run():
    run = {"params": 1_000_000, "step_s": 0.01, "exchange_s": 0.001,
           "peak_mem_bytes": 2 ** 31}
    gpus, gmem, bw = labels(run)
    assert gpus == 4 and gmem == 2.0
    assert bw == pytest.approx(2 * 1e6 * 32 / 0.01 / 1e9)     # 6.4 Gbit/s


def test_forest_on_the_shipped_measurements():
    runs = load_runs()
    assert len(runs) >= 80 and {r["model"] for r in runs} >= {"resnet18", "vgg16", "alexnet"}
    ev = evaluate(runs)
    rmse, r2 = ev["random_holdout"]["bandwidth_gbps"]
    assert r2 > 0.8                                 # interpolation between measured rows
    assert set(ev["per_model"]) == {r["model"] for r in runs}


def _jobs(max_gpus: int) -> list[JobSpec]:
    return parse_jobs_text(f"""
jobs:
  - {{name: v, model: vgg16, dataset_size: 1000, epochs: 1, batch_size: 32, max_gpus: {max_gpus}}}
  - {{name: g, model: googlenet, dataset_size: 1000, epochs: 1, batch_size: 32, max_gpus: 1}}
""")


def test_advice_warns_and_caps_only_jobs_beyond_the_point():
    advice = advise(_jobs(8))
    v, g = advice
    assert v.beyond and v.need.max_useful_gpus < 8 and "max_gpus 8" in v.warning()
    assert not g.beyond
    text = "jobs:\n  - {name: v, model: vgg16, dataset_size: 1000, epochs: 1, batch_size: 32, max_gpus: 8}\n"
    capped = yaml.safe_load(capped_text(text, advice[:1]))
    assert capped["jobs"][0]["max_gpus"] == v.need.max_useful_gpus


def test_validate_warns_and_caps(tmp_path, capsys):
    f = tmp_path / "jobs.yaml"
    f.write_text("jobs:\n  - {name: v, model: vgg16, dataset_size: 1000, epochs: 1, "
                 "batch_size: 32, max_gpus: 8}\n")
    assert main(["validate", str(f), "--cap-gpus"]) == 0
    out = capsys.readouterr()
    assert "beyond the point of diminishing returns" in out.err
    capped = yaml.safe_load(out.out)              # stdout: the capped job file alone
    assert capped["jobs"][0]["max_gpus"] < 8
