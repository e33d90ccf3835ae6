"""`sluice run` / `sluice demo` without a fabric: the closed-loop bandwidth derivation, the
decision step of the real-time loop, the report writer and argument validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from job_scheduler.core.estimator import (Estimator, effective_bandwidth, nominal_bandwidth,
                                          batches_for)
from sluice_common.jobspec import JobSpec, load_jobs
from job_scheduler.core.policies import make_policy
from end_to_end import closed_loop
from sluice.cli import main
from end_to_end.report import (PLOTS, bottleneck_link, comparison,
                           lagging_job, write_report)
from end_to_end.run import DEMO_JOBS
from end_to_end.runloop import RealTimeRun
from ps_runtime.worker_overrides import WorkerOverrides
from topologies import load_topology
from support.run_results import synthetic_result

TWO_RACK = load_topology("two-rack")          # emulation_bw_scale 0.01


def port(switch, peer, tx_mbit_emulated=0.0, rx_mbit_emulated=0.0):
    return {"switch": switch, "peer": peer, "tx_bytes_per_s": tx_mbit_emulated * 1e6 / 8,
            "rx_bytes_per_s": rx_mbit_emulated * 1e6 / 8}


# ---- closed loop ------------------------------------------------------------------------

def test_measured_usage_converts_emulated_rates_to_description_scale():
    used = closed_loop.measured_usage(TWO_RACK, [
        port("tor1", "spine1", tx_mbit_emulated=20),              # 20 Mbit/s emulated
        port("spine1", "tor1", rx_mbit_emulated=12),              # same link, other end
        port("tor2", "h3", tx_mbit_emulated=5, rx_mbit_emulated=30),
        port("tor2", None, tx_mbit_emulated=99),                  # unknown peer: ignored
        port("tor1", "h3", tx_mbit_emulated=99),                  # not a link: ignored
    ])
    assert used[("spine1", "tor1")] == pytest.approx(2000)         # 20 / 0.01, the larger end
    assert used[("h3", "tor2")] == pytest.approx(3000)             # busier direction
    assert set(used) == {("spine1", "tor1"), ("h3", "tor2")}


def test_available_bandwidth_is_nominal_minus_use_with_a_floor():
    used = {("spine1", "tor1"): 2000.0, ("spine1", "tor2"): 4900.0}
    avail = closed_loop.available_bandwidth(TWO_RACK, used, floor=0.1)
    assert avail[("spine1", "tor1")] == pytest.approx(3000)
    assert avail[("spine1", "tor2")] == pytest.approx(500)        # floored at 10% of 5000
    assert avail[("h1", "tor1")] == pytest.approx(10000)          # idle host link
    with pytest.raises(ValueError):
        closed_loop.available_bandwidth(TWO_RACK, used, floor=0)


def test_usage_is_averaged_over_recent_samples():
    avg = closed_loop.average_usage([{("spine1", "tor1"): 3000.0}, {},
                                     {("spine1", "tor1"): 0.0, ("h1", "tor1"): 600.0}])
    assert avg == {("spine1", "tor1"): pytest.approx(1000.0), ("h1", "tor1"): pytest.approx(200.0)}
    assert closed_loop.average_usage([]) == {}


def test_available_topology_feeds_effective_bandwidth_and_C_n():
    used = {("spine1", "tor1"): 4000.0}
    view = closed_loop.available_topology(TWO_RACK, used)
    assert [h.name for h in view.hosts] == [h.name for h in TWO_RACK.hosts]
    assert TWO_RACK.graph.edges["tor1", "spine1"]["bw"] == 5000   # original untouched
    # one worker in the other rack: its path crosses tor1's uplink, 1000 Mbit/s left
    assert effective_bandwidth(view, ["h1"], ["h3"]) == pytest.approx(1000)
    assert effective_bandwidth(TWO_RACK, ["h1"], ["h3"]) == pytest.approx(5000)
    est = Estimator(nominal_bw_mbps=nominal_bandwidth(TWO_RACK))
    job = JobSpec(name="j", model="resnet18", dataset_size=5000, epochs=1, batch_size=32, max_gpus=4)
    assert est.C(job, 2, 1000) > est.C(job, 2, 5000)


class FakeClient:
    def __init__(self, ports):
        self.ports = ports

    def links(self):
        return {"ports": self.ports}


def test_the_loop_hands_the_policy_the_measured_bandwidth(tmp_path):
    """A slot reads the controller's links and gives the policy (through the run's view)
    the available-bandwidth topology; launching is stubbed out."""
    job = JobSpec(name="big", model="resnet18", dataset_size=5000, epochs=1, batch_size=32,
                  max_gpus=8)
    est = Estimator(nominal_bw_mbps=nominal_bandwidth(TWO_RACK))
    policy = make_policy("fifo")                 # 8 GPUs: first fit spans h1, h2
    client = FakeClient([port("tor1", "h2", tx_mbit_emulated=60)])   # 6000 of 10000 used
    run = RealTimeRun(TWO_RACK, [job], policy, est, fabric=None, client=client, out_dir=tmp_path)
    launched = []
    run._launch = lambda d, guest=False: launched.append(d)
    run.loop.decide_slot([run.loop.admit(job)])
    d, = launched
    view = run.view.bandwidth_topology                  # the measured bandwidth model
    assert run.view.live_bandwidth(d.placement) == effective_bandwidth(view, d.ps_hosts,
                                                                       d.worker_hosts)
    assert view.host_by_name["h2"].bw == pytest.approx(4000)
    assert effective_bandwidth(view, d.ps_hosts, d.worker_hosts) < \
        effective_bandwidth(TWO_RACK, d.ps_hosts, d.worker_hosts)


def test_ctrl_c_in_the_loop_returns_a_partial_result(tmp_path):
    job = JobSpec(name="j", model="smallcnn", dataset_size=64, epochs=1, batch_size=32, max_gpus=1)

    def interrupted_policy(queued, state, now):
        raise KeyboardInterrupt

    est = Estimator(nominal_bw_mbps=nominal_bandwidth(TWO_RACK))
    run = RealTimeRun(TWO_RACK, [job], interrupted_policy, est, fabric=None,
                      client=FakeClient([]), out_dir=tmp_path)
    result = run.run()
    assert result["interrupted"] is True
    assert result["jobs"][0]["status"] == "queued"
    assert result["summary"]["finished"] == 0
    from end_to_end.result import RunResult, RunSummary     # the declared shape, all of it
    assert set(result) <= set(RunResult.__annotations__)
    assert {"topology", "policy", "jobs", "decisions", "summary"} <= set(result)
    assert set(result["summary"]) == set(RunSummary.__annotations__)


def test_registration_carries_the_job_size(tmp_path):
    """The controller's job rules need total batches and bytes per batch: torch workers
    push the model's float32 gradients, emulated ones what they were told."""
    from ps_runtime.launcher import WorkerOptions
    from end_to_end.predict import wire_bytes_of
    from end_to_end.run_options import RunOptions

    est = Estimator(nominal_bw_mbps=nominal_bandwidth(TWO_RACK))
    job = JobSpec(name="j", model="resnet18", dataset_size=640, epochs=2, batch_size=32, max_gpus=2)
    run = RealTimeRun(TWO_RACK, [job], None, est, fabric=None, client=FakeClient([]),
                      out_dir=tmp_path, options=RunOptions(worker_overrides={"j": WorkerOverrides(seed=3)}))
    assert wire_bytes_of(run.estimator, job, WorkerOptions()) == est.params(job) * 4
    emulated = WorkerOptions(compute="emulated", bw_scale=0.01)
    assert wire_bytes_of(run.estimator, job, emulated) == int(est.params(job) * 4 * 0.01)
    given = WorkerOptions(compute="emulated", bytes_per_batch=123456)
    assert wire_bytes_of(run.estimator, job, given) == 123456


def test_batches_split_the_data_over_the_workers():
    job = JobSpec(name="j", model="smallcnn", dataset_size=640, epochs=2, batch_size=32, max_gpus=4)
    assert batches_for(job, 1) == 40
    assert batches_for(job, 3) == 14          # ceil(1280 / 96)
    assert batches_for(job, 3, override=5) == 5


# ---- report -------------------------------------------------------------------------------

def test_report_files_tables_and_plots(tmp_path):
    result = synthetic_result(priority=True, slow=1.0)
    md = write_report(result, tmp_path)
    text = md.read_text()
    assert "| a | smallcnn | 2 | h3,h4 | h1 |" in text
    assert "| 1234 |" in text or "1235" in text           # the measured bw estimate
    assert "7.250" in text and "5.500" in text             # C(n) used vs nominal
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["finished"] == 2
    for name in PLOTS:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, name
    # spine1-tor2 averages 0.2 (0..0.4), spine1-tor1 0.2 as well: tie broken by name
    assert bottleneck_link(result) == "spine1-tor2"
    result["links"][0]["util"]["spine1-tor1"] = 0.9
    assert bottleneck_link(result) == "spine1-tor1"
    assert lagging_job(result) == "b"


def test_comparison_of_off_and_on():
    off, on = synthetic_result(False, slow=2.0), synthetic_result(True, slow=0.5)
    cmp = comparison(off, on)
    assert cmp["lagging_job"] == "b"
    assert cmp["lagging_iter_off_s"] == pytest.approx(2.2)
    assert cmp["lagging_iter_on_s"] == pytest.approx(0.7)
    assert cmp["lagging_iter_change_pct"] == pytest.approx(-68.2, abs=0.1)
    assert cmp["avg_jct_change_pct"] == pytest.approx(100 * (12.0 - 13.5) / 13.5, abs=0.1)
    assert comparison(off, on, lagging="a")["lagging_job"] == "a"


# ---- argument validation: exit 2, nothing started ---------------------------------------

def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "jobs.yaml"
    p.write_text(text)
    return p


GOOD = "jobs:\n  - {name: a, model: smallcnn, dataset_size: 64, epochs: 1, batch_size: 32, max_gpus: 2}\n"


@pytest.mark.parametrize("jobs_text, extra, needle", [
    ("jobs:\n  - {name: a, layers: [{type: fc, h: 1, w: 1, c_in: 10, c_out: 10}], dataset_size: 64,"
     " epochs: 1, batch_size: 32, max_gpus: 2}\n", [], "field 'model'"),
    (GOOD.replace("max_gpus: 2", "max_gpus: 17"), [], "field 'max_gpus'"),
    (GOOD.replace("epochs: 1", "epochs: 0"), [], "field 'epochs'"),
    ("jobs: [", [], "not valid YAML"),
    (GOOD, ["--topology", "no-such-topology"], "no-such-topology"),
    (GOOD, ["--policy", "nope"], "--policy"),
    (GOOD, ["--policy", "las", "--las-threshold", "0"], "--las-threshold"),
    (GOOD, ["--priority", "maybe"], "--priority"),
    (GOOD, ["--slot", "0"], "--slot"),
    (GOOD, ["--batches", "0"], "--batches"),
])
def test_bad_input_exits_2_and_starts_nothing(tmp_path, capsys, jobs_text, extra, needle):
    out = tmp_path / "out"
    code = main(["run", str(write(tmp_path, jobs_text)), "--out", str(out), *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err, err
    assert not out.exists()


def test_missing_job_file_exits_2(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_demo_validates_its_options_first(tmp_path, capsys):
    assert main(["demo", "--slot", "-1", "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()


def test_demo_jobs_are_valid_and_trainable():
    jobs = load_jobs(DEMO_JOBS)
    assert len(jobs) == 6 and len({j.model for j in jobs}) >= 2
    from ps_runtime.models import MODEL_NAMES
    assert all(j.model in MODEL_NAMES for j in jobs)


def test_demo_workload_spreads_two_overlapping_jobs_across_racks_in_the_simulator():
    """The demo's point: with the default profile on its topology, Proteus + Liquid put
    two jobs across both racks at the same time (so they share the uplinks)."""
    from job_scheduler.core.policies import make_policy as sim_policy
    from job_scheduler.simulation.simulator import Simulator
    from ps_runtime.calibration import runtime_terms
    from end_to_end.run import DEMO_TOPOLOGY
    from topologies import load_topology

    topo = load_topology(DEMO_TOPOLOGY)
    est = Estimator(nominal_bw_mbps=nominal_bandwidth(topo), **runtime_terms("emulated"))
    sim = Simulator(topo, load_jobs(DEMO_JOBS), sim_policy("lyapunov"), slot=1.0, estimator=est)
    starts = {}
    real_start = sim.start

    def start(j, placement):
        starts[j] = (sim.now, placement)
        real_start(j, placement)
    sim.start = start
    res = sim.run()
    rack = {h.name: h.rack for h in topo.hosts}
    spread = [j for j, (t, p) in starts.items()
              if len({rack[h] for h in (*p.ps_hosts, *p.worker_hosts)}) == 2]
    assert len(spread) >= 2
    a, b = spread[:2]
    (ta, _), (tb, _) = starts[a], starts[b]
    assert max(ta, tb) < min(ta + res.jct[a], tb + res.jct[b])     # they overlap
    assert any(len(set(p.worker_hosts)) == 1 for _, p in starts.values())   # and some stay home


def test_comparison_carries_placement_and_prediction_per_job():
    off, on = synthetic_result(False, slow=2.0), synthetic_result(True, slow=0.5)
    for r in (off, on):
        for j in r["jobs"]:
            j.update(hosts=3, racks=2, predicted_run_s=8.0, run_s=10.0, first_batch_s=0.5)
    cmp = comparison(off, on)
    job = cmp["jobs"]["a"]
    assert (job["gpus"], job["hosts"], job["racks"]) == (2, 3, 2)
    assert job["predicted_jct_s"] == pytest.approx(1.0 + 8.0)        # wait + start-up + C(n)
    assert job["jct_off_s"] == 12.0 and job["jct_on_s"] == 10.5   # turnarounds of each pass
    assert cmp["model_check"]["median_rel_error"] == pytest.approx(0.2)
    assert cmp["first_batch_median_s"] == 0.5
