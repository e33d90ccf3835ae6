"""Preemption costs in the simulator (job_scheduler.core.preemption, ``Simulator(costs=...)``):
the measured table's lookup, LAS charged per preemption, migrations counted, and `sluice
simulate --preemption-cost` in JSON."""

from __future__ import annotations

import json

import pytest

from sluice_common.jobspec import JobSpec
from job_scheduler.core.policies import make_policy
from job_scheduler.core.preemption import CostRow, PreemptionCosts, ZeroCosts, load_costs
from job_scheduler.simulation.simulator import Simulator
from sluice.cli import main as sluice_main
from topologies import load_topology

ROWS = [CostRow("resnet18", "emulated", 1, 1.0, 2.0), CostRow("resnet18", "emulated", 4, 2.0, 3.0),
        CostRow("vgg16", "emulated", 1, 5.0, 8.0), CostRow("vgg16", "emulated", 4, 9.0, 12.0),
        CostRow("smallcnn", "torch", 1, 0.5, 9.0)]


def test_cost_lookup_nearest_count_and_size_fit_for_unmeasured_models():
    c = PreemptionCosts(ROWS)
    assert c.suspend_resume("resnet18", 1) == (1.0, 2.0)
    assert c.suspend_resume("resnet18", 3) == (2.0, 3.0)      # nearest measured count: 4
    assert c.total("vgg16", 8) == 21.0
    # alexnet (61 M params) lies between resnet18 (11.7 M) and vgg16 (138 M): so does its cost
    s, r = c.suspend_resume("alexnet", 1)
    assert 1.0 < s < 5.0 and 2.0 < r < 8.0
    assert load_costs("zero").total("vgg16", 8) == 0 and load_costs(None) is None
    assert load_costs("measured").total("resnet18", 2) > 0      # the shipped measured table


def _las_jobs():
    # a long 4-GPU job, then a short one that outranks it once it has attained service
    return [JobSpec(name="long", model="resnet18", dataset_size=5_000_000, epochs=1, batch_size=32,
                    max_gpus=16, arrival=0.0),
            JobSpec(name="short", model="resnet18", dataset_size=3200, epochs=1, batch_size=32,
                    max_gpus=16, arrival=600.0)]


def test_las_pays_the_measured_cost_per_preemption():
    topo = load_topology("two-rack")
    runs = {}
    for costs in (ZeroCosts(), PreemptionCosts(ROWS)):
        sim = Simulator(topo, _las_jobs(), make_policy("las"), slot=1.0, costs=costs)
        runs[isinstance(costs, PreemptionCosts)] = (sim, sim.run())
    (zero, rz), (paid, rp) = runs[False], runs[True]
    assert zero.preemptions == paid.preemptions >= 1
    assert zero.charged_s == 0 and paid.charged_s == pytest.approx(paid.preemptions * 5.0)
    # the preempted job's finish moves by the charged seconds (it is the last to finish)
    assert rp.jct[0] == pytest.approx(rz.jct[0] + paid.charged_s, rel=1e-6)


def test_simulate_json_reports_preemptions_migrations_and_avg_jct(tmp_path, capsys):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n" + "".join(
        f"  - {{name: j{i}, model: resnet18, dataset_size: {20000 * (i + 1)}, epochs: 1, "
        f"batch_size: 32, max_gpus: 8, arrival: {i * 30}}}\n" for i in range(4)))
    out = {}
    for mode in ("zero", "measured"):
        assert sluice_main(["simulate", "--workload", str(jobs), "--policies", "las,fifo",
                            "--preemption-cost", mode, "--json"]) == 0
        out[mode] = json.loads(capsys.readouterr().out)["policies"]
    for mode in out:
        for pol in ("las", "fifo"):
            assert {"preemptions", "migrations", "avg_jct"} <= set(out[mode][pol])
        assert out[mode]["fifo"]["preemptions"] == 0
    assert out["measured"]["las"]["avg_jct"] >= out["zero"]["las"]["avg_jct"]
    assert sluice_main(["simulate", "--workload", str(jobs), "--migrate"]) == 2
