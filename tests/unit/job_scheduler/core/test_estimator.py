"""Profiles, eq. 1/4/5 estimates, trace calibration and placement bandwidth."""

from __future__ import annotations

import math

import pytest

from job_scheduler.core.estimator import (Estimator, effective_bandwidth, nominal_bandwidth)
from sluice_common.jobspec import JobSpec
from sluice_common.models import Layer
from sluice_common.profile import (P100_PROFILE_PATH, fit_alpha, load_profile, parse_profile,
                                   save_profile)
from job_scheduler.simulation.workloads import load_workload
from sluice_common.errors import InputError
from topologies import load_topology
from job_scheduler.simulation.workloads import SHARED_WORKLOADS

TIRESIAS = str(SHARED_WORKLOADS / "tiresias_60_job.csv")


def hand_profile():
    # resnet18: linear points, so alpha(b) = 1 + 0.5*(b-1) exactly; vgg16: b=1 only.
    return parse_profile({"device": "hand", "models": {
        "resnet18": {"points": {1: 0.01, 2: 0.015, 5: 0.03, 9: 0.05}},
        "vgg16": {"points": {1: 0.2}}}}, "hand")


def job(**over):
    base = dict(name="j", model="resnet18", dataset_size=3200, epochs=2, batch_size=32,
                max_gpus=8)
    base.update(over)
    return JobSpec(**base)


# ---- alpha(b) --------------------------------------------------------------------------------

def test_fit_alpha_recovers_known_curve():
    points = {b: 0.02 * (1 + 0.4 * (b - 1) ** 0.7) for b in (1, 2, 4, 8, 16, 64)}
    beta, gamma = fit_alpha(points)
    assert beta == pytest.approx(0.4, rel=0.02) and gamma == pytest.approx(0.7, abs=0.01)


def test_single_point_means_linear():
    mp = hand_profile().device().models["vgg16"]
    assert mp.alpha(1) == 1 and mp.alpha(16) == pytest.approx(16)


def test_default_profile_is_the_measured_h100_one():
    dev = load_profile().device()
    assert dev.device.startswith("cuda-nvidia-h100")
    assert {"resnet18", "alexnet", "vgg16", "googlenet", "smallcnn"} <= set(dev.models)
    # The measured points are kept as measured (resnet18 b64: 15.1 ms, vgg16 b32: 29.4 ms).
    assert dev.models["resnet18"].points[64] == pytest.approx(0.01512, rel=0.01)
    assert dev.models["vgg16"].points[32] == pytest.approx(0.02945, rel=0.01)
    # A model the H100 run did not measure is estimated from the nearest measured one.
    big = Estimator().cost_bat(JobSpec(name="r50", model="resnet50", dataset_size=1, epochs=1,
                                       batch_size=32, max_gpus=1))
    assert big > 0


def test_p100_profile_is_a_named_option_covering_every_trace_and_paper_model():
    assert load_profile("p100").path == str(P100_PROFILE_PATH)
    dev = load_profile("p100").device()
    needed = {"alexnet", "resnet18", "resnet50", "googlenet", "densenet121", "vgg11", "vgg16",
              "inception_v3", "vgg19", "resnet101", "resnet152", "inception_v4"}
    assert needed <= set(dev.models)
    for mp in dev.models.values():
        assert mp.alpha(1) == pytest.approx(1)
        costs = [mp.cost_bat(b) for b in (1, 2, 8, 32, 128)]
        assert costs == sorted(costs)                       # bigger batch, longer batch
        per_sample = [c / b for c, b in zip(costs, (1, 2, 8, 32, 128))]
        assert per_sample == sorted(per_sample, reverse=True)   # but cheaper per sample
    # The published ResNet-50 figure (219 img/s at b=64) is reproduced by the fit.
    assert 64 / dev.models["resnet50"].cost_bat(64) == pytest.approx(219, rel=0.01)


# ---- eq. 1, 4, 5 (hand-computed) ------------------------------------------------------------

def test_equations_hand_computed():
    est = Estimator(hand_profile(), nominal_bw_mbps=1000)
    j = job()
    assert est.params(j) == 11_689_512
    assert est.cost_bat(j, 1) == pytest.approx(0.01)
    assert est.cost_bat(j) == pytest.approx(0.01 * (1 + 0.5 * 31))          # 0.165 s
    # iterations per worker on 4 GPUs: e*m/(b*n) = 2*3200/(32*4) = 50
    assert est.cost(j, 4) == pytest.approx(0.165 * 50)                      # 8.25 s
    bits = 11_689_512 * 4 * 8 * 2                                            # push + pull
    assert est.comm(j, 4, 1000) == pytest.approx(50 * bits / 1e9)            # 37.406 s
    assert est.C(j, 4, 1000) == pytest.approx(8.25 + 50 * bits / 1e9)
    assert est.C(j, 4) == est.C(j, 4, 1000)                                  # nominal
    assert est.comm(j, 1, 1000) == 0 and est.C(j, 1, 5) == est.cost(j, 1)    # Comm(1) = 0
    assert est.cost1(j) == pytest.approx(0.165 * 200)
    assert est.comm(j, 4, math.inf) == 0


def test_bad_arguments():
    est = Estimator(hand_profile())
    with pytest.raises(ValueError):
        est.cost(job(), 0)
    with pytest.raises(ValueError):
        est.comm(job(), 2, 0)
    with pytest.raises(InputError, match="no device"):
        Estimator(hand_profile(), device="tpu")


def test_custom_layers_scale_from_nearest_profiled_model():
    est = Estimator(hand_profile())
    layers = (Layer("fc", c_in=1000, c_out=1000),)          # 1e6 params: nearest resnet18
    j = job(model="custom", layers=layers)
    assert est.params(j) == 1_000_000
    assert est.cost_bat(j, 1) == pytest.approx(0.01 * 1e6 / 11_689_512)
    assert est.cost_bat(j, 9) / est.cost_bat(j, 1) == pytest.approx(5)     # resnet18's alpha


# ---- trace calibration ---------------------------------------------------------------------

def test_trace_jobs_reproduce_their_duration_and_rescale():
    est = Estimator()
    for j in load_workload(TIRESIAS, "tiresias"):
        assert est.C(j, j.trace_gpus) == pytest.approx(j.trace_duration)
        untraced = JobSpec(j.name, j.model, j.dataset_size, j.epochs, j.batch_size, j.max_gpus)
        for n in (1, 2, 4, 8):                    # same shape as the uncalibrated model
            ratio = est.C(j, n) / est.C(j, j.trace_gpus)
            assert ratio == pytest.approx(est.C(untraced, n) / est.C(untraced, j.trace_gpus))
    one = next(j for j in load_workload(TIRESIAS, "tiresias") if j.trace_gpus == 1)
    assert est.C(one, 2, math.inf) == pytest.approx(one.trace_duration / 2)  # pure compute


# ---- bandwidth from placement ---------------------------------------------------------------

def test_effective_bandwidth_two_rack():
    t = load_topology("two-rack")          # 10 Gbit host links, 5 Gbit uplinks
    # 4 workers behind rack1's uplink, PS in rack2: 5000/4 on the uplink.
    assert effective_bandwidth(t, ["h3"], ["h1", "h1", "h2", "h2"]) == 1250
    # inside one rack: the PS host link carries 3 flows.
    assert effective_bandwidth(t, ["h1"], ["h2", "h2", "h2"]) == pytest.approx(10000 / 3)
    # co-located workers use no network; the remote one is alone on its path.
    assert effective_bandwidth(t, ["h1"], ["h1", "h1", "h2"]) == 10000
    assert effective_bandwidth(t, ["h1"], ["h1", "h1"]) == 50_000       # one 100 Gbit/s bus, 2 flows
    assert effective_bandwidth(t, ["h1"], ["h1", "h1"], in_host=False) == math.inf
    # 2 servers, each worker sends half to each: 4 flows over the uplink -> 2 * 1250.
    assert effective_bandwidth(t, ["h3", "h4"], ["h1", "h1"]) == 2500
    assert nominal_bandwidth(t) == 10000
    with pytest.raises(ValueError):
        effective_bandwidth(t, ["h9"], ["h1"])


def test_comm_from_placement_feeds_the_estimate():
    t = load_topology("two-rack")
    est = Estimator(hand_profile())
    j = job()
    spread = est.C(j, 4, effective_bandwidth(t, ["h3"], ["h1", "h1", "h2", "h2"]))
    packed = est.C(j, 4, effective_bandwidth(t, ["h1"], ["h1"] * 4))
    # packed: the 4 flows share the host's 100 Gbit/s bus (25 Gbit/s each)
    assert packed == pytest.approx(est.cost(j, 4) + est.comm(j, 4, 25_000))
    assert est.cost(j, 4) < packed < spread


# ---- profile files --------------------------------------------------------------------------

def test_save_profile_round_trip(tmp_path):
    path = save_profile(tmp_path / "p.yaml", "cpu-here", {"smallcnn": {1: 0.002, 4: 0.005}},
                        source="measured", header="line one\nline two")
    text = path.read_text()
    assert text.startswith("# line one\n# line two\n")
    prof = load_profile(path)
    assert prof.default_device == "cpu-here"
    assert prof.device().models["smallcnn"].points == {1: 0.002, 4: 0.005}
    est = Estimator(path)
    assert est.cost_bat(job(model="smallcnn", batch_size=4)) == pytest.approx(0.005, rel=1e-3)


def test_multi_device_profile(tmp_path):
    prof = parse_profile({"default_device": "b", "devices": {
        "a": {"models": {"vgg16": {"points": {1: 1.0}}}},
        "b": {"models": {"vgg16": {"points": {1: 2.0}}}}}})
    assert Estimator(prof).cost_bat(job(model="vgg16"), 1) == 2.0
    assert Estimator(prof, device="a").cost_bat(job(model="vgg16"), 1) == 1.0


@pytest.mark.parametrize("data, match", [
    ({"device": "d", "models": {"resnet18": {"points": {2: 0.1}}}}, "batch size 1"),
    ({"device": "d", "models": {"resnet18": {"points": {1: -0.1}}}}, "> 0"),
    ({"device": "d", "models": {"resnet18": {"points": {True: 0.1}}}}, "integer"),
    ({"device": "d", "models": {"lenet": {"points": {1: 0.1}}}}, "unknown model"),
    ({"device": "d", "models": {"resnet18": {"points": {1: 1}},
                                "ResNet18": {"points": {1: 1}}}}, "twice"),
    ({"device": "d", "models": {}}, "non-empty"),
    ({"models": {"resnet18": {"points": {1: 0.1}}}}, "device"),
    ({"devices": {"a": {"models": {"vgg16": {"points": {1: 1}}}}}, "default_device": "z"},
     "not one of"),
    ([], "mapping"),
])
def test_bad_profiles(data, match):
    with pytest.raises(InputError, match=match):
        parse_profile(data, "p.yaml")


def test_bad_profile_file(tmp_path):
    (tmp_path / "p.yaml").write_text("device: [")
    with pytest.raises(InputError, match="not valid YAML"):
        load_profile(tmp_path / "p.yaml")
    with pytest.raises(InputError, match="cannot read"):
        load_profile(tmp_path / "none.yaml")
    with pytest.raises(InputError):          # refuses to write what it could not read back
        save_profile(tmp_path / "q.yaml", "d", {"resnet18": {4: 0.1}})
    assert not (tmp_path / "q.yaml").exists()


def test_runtime_terms_sync_and_link_efficiency_hand_computed():
    """sync_s is paid every iteration (one GPU included) and sits with the compute, so
    Comm stays proportional to 1/bw; link_efficiency divides the bandwidth."""
    base = Estimator(hand_profile(), nominal_bw_mbps=1000)
    est = Estimator(hand_profile(), nominal_bw_mbps=1000, sync_s=0.01, link_efficiency=0.8,
                    startup_s=2.0)
    j = job()
    iters4 = j.epochs * j.dataset_size / (j.batch_size * 4)
    assert est.cost(j, 4) == pytest.approx(base.cost(j, 4) + 0.01 * iters4)
    assert est.comm(j, 4, 500.0) == pytest.approx(base.comm(j, 4, 500.0) / 0.8)
    assert est.comm(j, 4, 1.0) == pytest.approx(500.0 * est.comm(j, 4, 500.0))
    assert est.comm(j, 1, 500.0) == 0.0
    assert est.run_time(j, 4, 500.0) == pytest.approx(2.0 + est.C(j, 4, 500.0))
    # docs/design.md's point: 2 workers, 1 server, 8 MB key, 100 Mbit/s links (each worker gets
    # 50 through the server's link): 2.56 s at line rate, 3.2 s measured = efficiency 0.8
    key = JobSpec(name="k", model="custom", dataset_size=64, epochs=1, batch_size=32, max_gpus=2,
                  layers=(Layer("fc", h=1, w=1, c_in=2000, c_out=1000),))
    assert Estimator(hand_profile()).comm(key, 2, 50.0) == pytest.approx(2.56)
    assert est.comm(key, 2, 50.0) == pytest.approx(3.2)
    with pytest.raises(ValueError):
        Estimator(hand_profile(), link_efficiency=0.0)
