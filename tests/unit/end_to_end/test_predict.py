"""The exchange model's per-pass prediction of the demo's JCTs (end_to_end.predict)."""

import pytest

from end_to_end.predict import link_job, predict_pass
from end_to_end.model_run import model_run
from sluice_common.exchange import ExchangeConstants, Sharer
from topologies import load_topology

C = ExchangeConstants(overhead_s=0.002, per_key_s=0.001, hop_s=0.0002, efficiency=0.9,
                      local_Bps=500e6, queue_fill=0.3)
TOPO = load_topology("two-rack-100g")        # 100 / 50 Mbit/s emulated


def rec(name, ps, workers, batches=50, nbytes=46_760, compute=0.075, start=0.0, arrival=0.0):
    return {"name": name, "ps_hosts": ps, "worker_hosts": workers, "batches": batches,
            "bytes_per_batch": nbytes, "keys": 1, "pipeline_keys": 0,
            "batch_compute_s": compute, "start": start, "arrival": arrival}


def test_in_host_job_is_startup_plus_its_batches():
    r = rec("g", ["h1"], ["h1", "h1", "h1"], compute=0.2)
    job = link_job(TOPO, r, C)
    assert job.links == {} and job.path == ()
    alone = Sharer("g", r["bytes_per_batch"], 1, (), 0.2).alone_s(C)
    got = predict_pass(TOPO, [r], None, 1.0, C)
    assert got["g"] == pytest.approx(1.0 + 50 * alone, rel=1e-3)


def test_the_server_s_turns_add_to_a_one_host_batch_and_hide_behind_a_slow_wire():
    r = rec("g", ["h1"], ["h1", "h1", "h1"], compute=0.2)
    plain = predict_pass(TOPO, [r], None, 1.0, C)["g"]
    slow = predict_pass(TOPO, [r], None, 1.0, C, server_per_worker_s=0.002)["g"]
    assert slow - plain == pytest.approx(50 * 3 * 0.002, rel=1e-3)
    # 4 MB a batch over the emulated links takes far longer than three turns of 2 ms
    far = rec("f", ["h1"], ["h3", "h3", "h4"], nbytes=4_000_000)
    assert predict_pass(TOPO, [far], None, 1.0, C, server_per_worker_s=0.002)["f"] == \
        pytest.approx(predict_pass(TOPO, [far], None, 1.0, C)["f"])


def test_workers_behind_one_link_share_it():
    one = link_job(TOPO, rec("a", ["h1"], ["h3"]), C)
    four = link_job(TOPO, rec("b", ["h1"], ["h3", "h3", "h4", "h4"]), C)
    # the PS's host link carries four pairs: a quarter each; the uplinks too
    assert min(four.path) == pytest.approx(min(one.path) / 4)
    assert four.links["spine1-tor1"][1] == 4


def test_cross_rack_jobs_share_the_uplinks_and_priority_helps_the_small_one():
    small = rec("small", ["h1"], ["h3", "h4"], batches=40, start=0.0)
    big = rec("big", ["h2"], ["h3", "h4"], batches=200, start=0.0, compute=0.01)
    alone = predict_pass(TOPO, [small], None, 0.0, C)["small"]
    off = predict_pass(TOPO, [small, big], None, 0.0, C)
    on = predict_pass(TOPO, [small, big], "remaining", 0.0, C)
    assert off["small"] > 1.05 * alone
    assert on["small"] < off["small"]
    assert on["small"] == pytest.approx(alone, rel=0.02)
    assert on["big"] > on["small"] and on["big"] > 0.8 * off["big"]
    # a job that arrives later starts later and is charged from its arrival
    late = dict(small, name="late", start=5.0, arrival=4.0)
    assert predict_pass(TOPO, [late], None, 0.0, C)["late"] == pytest.approx(alone + 1.0, rel=1e-3)


def test_demo_comparison_carries_both_passes_predictions_and_racks():
    from end_to_end.report import comparison
    from support.run_results import synthetic_result

    off, on = synthetic_result(False, slow=2.0), synthetic_result(True, slow=0.5)
    topo = load_topology("two-rack")
    for r in (off, on):
        for j in r["jobs"]:
            j.update(bytes_per_batch=40_000, keys=1, pipeline_keys=0, batch_compute_s=0.05,
                     racks=2)
    pred_off = predict_pass(topo, off["jobs"], None, 1.0, C)
    pred_on = predict_pass(topo, on["jobs"], "remaining", 1.0, C)
    for r, pred in ((off, pred_off), (on, pred_on)):      # as sluice demo records them
        for j in r["jobs"]:
            j["predicted_jct_model_s"] = pred[j["name"]]
    cmp = comparison(off, on)
    for name, j in cmp["jobs"].items():
        assert j["predicted_jct_off_s"] == pred_off[name] > 1.0
        assert j["predicted_jct_on_s"] == pred_on[name]
        assert j["racks"] == 2
    # the two jobs share both uplinks: with the rule the smaller gains, fair sharing not
    assert pred_on["a"] <= pred_off["a"]


def test_demo_predictions_come_from_the_dry_run_before_any_pass():
    import argparse

    import end_to_end.cli as cli
    from end_to_end import run
    from ps_runtime.calibration import runtime_terms

    ap = argparse.ArgumentParser()
    cli.configure_demo(ap)
    config = cli.run_config(ap.parse_args(["--compute", "emulated"]), jobs=str(run.DEMO_JOBS),
                            topology=run.DEMO_TOPOLOGY)
    jobs, topology = run.validate(config)
    planned = model_run(jobs, topology, config, run.run_estimator(
        topology, config.compute, config.profile)).records
    assert [r["name"] for r in planned] == [j.name for j in jobs]
    for r in planned:
        assert r["start"] >= r["arrival"] and r["batches"] >= 1 and r["bytes_per_batch"] > 0
        assert 0 < r["batch_compute_s"] < 1
    cross = [r for r in planned
             if len({topology.host_by_name[h].rack for h in r["ps_hosts"] + r["worker_hosts"]}) > 1]
    startup = runtime_terms("emulated")["startup_s"]
    off = predict_pass(topology, planned, None, startup)
    on = predict_pass(topology, planned, config.rank, startup)
    assert set(off) == set(on) == {j.name for j in jobs}
    for r in planned:       # never faster than its compute alone after its start-up
        assert off[r["name"]] >= r["start"] - r["arrival"] + startup + r["batches"] * r["batch_compute_s"]
    # two jobs cross the racks and share uplinks: their JCT differs between the passes
    # beyond the priority pass's registration; the in-host jobs' only by that
    from sluice_common.exchange import default_constants

    register = default_constants().startup_priority_s
    assert len(cross) >= 2
    assert any(abs(on[r["name"]] - off[r["name"]] - register) > 1e-2 for r in cross)
    assert all(on[n] == pytest.approx(off[n] + register, abs=2e-3)
               for n in off if n not in {r["name"] for r in cross})


def test_a_suspended_job_is_idle_between_its_runs_and_pays_each_start_up():
    whole = rec("s", ["h1"], ["h1", "h1"], batches=40, compute=0.1)
    alone = predict_pass(TOPO, [whole], None, 1.0, C)["s"]
    # the dry run stopped it at 3 s and started it again at 10 s, on another host
    runs = [{"start": 0.0, "stop": 3.0, "ps_hosts": ["h1"], "worker_hosts": ["h1", "h1"],
             "batches": 40},
            {"start": 10.0, "stop": None, "ps_hosts": ["h3"], "worker_hosts": ["h3", "h3"],
             "batches": 40}]
    got = predict_pass(TOPO, [dict(whole, segments=runs)], None, 1.0, C)["s"]
    # 2 s of training before the stop, the rest after the second start-up
    assert got == pytest.approx(10.0 + 1.0 + (alone - 1.0) - 2.0, rel=1e-3)
    # a job whose last run stops before its work is done gets no prediction
    cut = dict(whole, name="cut", segments=runs[:1])
    assert "cut" not in predict_pass(TOPO, [cut], None, 1.0, C)


def test_the_dry_runs_records_carry_its_suspensions():
    from end_to_end import run
    from end_to_end.arms import ARMS
    from end_to_end.demo_arms import arm_config, workload
    from end_to_end.workload_draw import DrawSpec

    topology = load_topology("two-rack-100g")
    config = arm_config(run.RunConfig(jobs="x.yaml", topology="two-rack-100g",
                                      compute="emulated"), ARMS["d"])
    # a draw (tuning seed 1000) on which the sluice policy suspends its first, long job
    jobs = workload(topology, config, 1000, DrawSpec(jobs=10)).jobs
    planned = model_run(jobs, topology, config, run.run_estimator(
        topology, config.compute, config.profile)).records
    assert [r["name"] for r in planned] == [j.name for j in jobs]
    suspended = [r for r in planned if len(r["segments"]) > 1]
    assert suspended
    for r in planned:
        segs = r["segments"]
        assert segs[0]["start"] == r["start"] and segs[-1]["stop"] is None
        assert all(s["stop"] is not None and s["stop"] >= s["start"] for s in segs[:-1])
        assert all(b["start"] >= a["stop"] for a, b in zip(segs, segs[1:]))
    # its prediction waits for its second run
    pred = predict_pass(topology, planned, config.rank, 1.0)
    for r in suspended:
        assert pred[r["name"]] > r["segments"][-1]["start"] + 1.0 - r["arrival"]
