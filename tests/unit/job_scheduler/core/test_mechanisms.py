"""Migration in the simulator: a resumed job's GPU count picked again (grows/shrinks,
charged at the measured resume cost of the new count), Gandiva time-slicing and packing
(job_scheduler/core/mechanisms.py), and `sluice simulate --time-slice/--pack --json`."""

from __future__ import annotations

import json
import math

import pytest

from job_scheduler.core.policies import make_policy
from job_scheduler.core.mechanisms import (PACK_SLOWDOWN, MechanismOptions, fits_packed,
                                           slice_victims)
from job_scheduler.core.preemption import CostRow, PreemptionCosts, ZeroCosts
from job_scheduler.simulation.simulator import Simulator
from sluice.cli import main as sluice_main
from sluice_common.jobspec import JobSpec
from sluice_common.placement import Placement
from topologies.model import parse_topology

ROWS = [CostRow("resnet18", "emulated", 1, 1.0, 2.0), CostRow("resnet18", "emulated", 4, 2.0, 3.0),
        CostRow("vgg16", "emulated", 1, 5.0, 8.0), CostRow("vgg16", "emulated", 4, 9.0, 12.0)]


def sharing_sim(topo, jobs, policy, *, costs=None, network=True, **mechanisms):
    """The simulator with the mechanisms of ``mechanisms`` (MechanismOptions fields) and
    the cost table ``costs`` (none: zero, as `sluice simulate --preemption-cost zero`)."""
    return Simulator(topo, jobs, policy, costs=costs or ZeroCosts(), network=network,
                     mechanisms=MechanismOptions(**mechanisms).build())


def _topo(hosts: int = 1, gpus: int = 4):
    return parse_topology({
        "name": f"t{hosts}x{gpus}", "switches": [{"name": "tor1", "role": "tor"}],
        "racks": [{"name": "r1", "tor": "tor1"}],
        "hosts": [{"name": f"h{i + 1}", "rack": "r1", "gpus": gpus, "bw": 10000}
                  for i in range(hosts)]})


def _job(name: str, arrival: float, gpus: int = 4, size: int = 64_000, model: str = "resnet18"):
    return JobSpec(name=name, model=model, dataset_size=size, epochs=1, batch_size=32,
                   max_gpus=gpus, arrival=arrival)


def test_slice_victims_longest_running_first_only_after_a_whole_quantum():
    segs = [(0, 2, 0.0), (1, 1, 5.0), (2, 4, 10.0)]
    # job 2 ran 2 s < 5 s; jobs 0 then 1 yield until 3 GPUs are free
    assert slice_victims(segs, free=0, demand=3, now=12.0, quantum=5.0) == [0, 1]
    assert slice_victims(segs, free=0, demand=2, now=12.0, quantum=5.0) == [0]
    assert slice_victims(segs, free=3, demand=3, now=12.0, quantum=5.0) == []
    assert slice_victims(segs, free=0, demand=8, now=12.0, quantum=20.0) == []


def test_fits_packed_caps_each_job_at_half_the_gpu_memory():
    assert fits_packed(30.0, 40.0, gpu_gib=80.0)
    assert not fits_packed(41.0, 1.0, gpu_gib=80.0)


def test_resume_on_another_count_is_a_shrink_charged_at_the_new_counts_resume():
    # hand-checked: suspended on 4 GPUs (suspend 2.0 s), resumed on 1 (resume 2.0 s):
    # 4.0 s charged, not the 5.0 s of a resume on 4
    sim = Simulator(_topo(), [_job("a", 0.0)], make_policy("fifo"), costs=PreemptionCosts(ROWS))
    sim.waiting[0] = None
    sim.start(0, Placement("a", ("h1",), ("h1",) * 4))
    sim.now = 10.0
    sim.preempt(0)
    assert sim.restart_overhead[0] == 5.0 and sim.charged_s == 5.0
    sim.start(0, Placement("a", ("h1",), ("h1",)))
    assert (sim.shrinks, sim.grows) == (1, 0)
    assert sim.charged_s == pytest.approx(4.0)
    assert sim.running[0].t_last == pytest.approx(14.0)     # no progress while it restores
    sim.now = 20.0
    sim.preempt(0)
    sim.start(0, Placement("a", ("h1",), ("h1",) * 4))      # 1 -> 4: suspend 1.0 + resume 3.0
    assert (sim.shrinks, sim.grows) == (1, 1)
    assert sim.charged_s == pytest.approx(8.0)


def _two_jobs():
    # a long job that takes every GPU, then a second one that has to wait for it
    return [_job("long", 0.0, size=4_000_000), _job("late", 5.0, size=3_000_000)]


@pytest.mark.parametrize("policy", ["fifo", "lyapunov", "sluice"])
def test_time_slicing_takes_turns_and_every_switch_is_charged(policy):
    costs = PreemptionCosts(ROWS)
    # an ideal fabric: C(n) falls with n, so the elastic policies take the whole host too
    base = sharing_sim(_topo(), _two_jobs(), make_policy(policy), costs=costs,
                            network=False)
    rb = base.run()
    sim = sharing_sim(_topo(), _two_jobs(), make_policy(policy), costs=costs,
                           time_slice=30.0, network=False)
    r = sim.run()
    assert base.counts["time-slice"] == 0 and sim.counts["time-slice"] >= 1
    # every switch costs suspend + resume (resnet18 at 4 GPUs: 5 s)
    assert sim.charged_s == pytest.approx(5.0 * (sim.counts["time-slice"] + sim.preemptions), rel=1e-6)
    # without slicing `late` waits for `long`; with it, `late` starts within one quantum
    assert base.first_start[1] > 300.0
    assert sim.first_start[1] - 5.0 <= 30.0 + 1.0
    # both jobs need the whole host: the switches' cost cannot hide behind other work
    assert r.makespan >= rb.makespan + sim.charged_s - 1e-6


def test_a_time_sliced_elastic_job_resumes_on_argmin_C_under_the_free_gpus():
    # lyapunov (k = job): n = argmin C(n) over n <= free GPUs. `long` runs on the whole
    # host; `b` (max 2) arrives and waits; at the quantum `long` yields and `b` takes 2;
    # `long` resumes on the 2 GPUs left: a shrink; after `b` ends it is sliced again
    # only if something waits, so it stays small (lyapunov does not regrow)
    jobs = [_job("long", 0.0, size=800_000), _job("b", 5.0, gpus=2, size=32_000)]
    sim = sharing_sim(_topo(), jobs, make_policy("lyapunov"),
                           costs=PreemptionCosts(ROWS), time_slice=30.0, network=False)
    seen = []
    start = sim.start

    def spy(j, p):
        free = sim.state.total_free
        start(j, p)
        seen.append((sim.jobs[j].name, free, p.gpus))
    sim.start = spy
    sim.run()
    # on an ideal fabric C(n) falls with n: argmin under the free GPUs is all of them
    for name, free, n in seen:
        assert n == min(free, next(j.max_gpus for j in jobs if j.name == name))
    assert ("long", 4, 4) in seen and ("long", 2, 2) in seen
    assert sim.shrinks >= 1


def test_packing_shares_a_gpu_and_slows_both_by_the_factor():
    # two one-GPU jobs on a one-GPU host: without packing the second waits; packed,
    # both run at 1/PACK_SLOWDOWN of their speed from the second's arrival
    jobs = [JobSpec(name=f"p{i}", model="resnet18", dataset_size=32_000, epochs=1,
                    batch_size=32, max_gpus=1, arrival=float(i)) for i in range(2)]
    alone = sharing_sim(_topo(gpus=1), jobs, make_policy("fifo"))
    ra = alone.run()
    packed = sharing_sim(_topo(gpus=1), jobs, make_policy("fifo"), pack=True)
    rp = packed.run()
    assert alone.counts["packed"] == 0 and packed.counts["packed"] == 1
    d = ra.jct[0]                       # one job's run time alone (it arrived at 0)
    assert ra.jct[1] == pytest.approx(math.ceil(d) + d - 1.0, rel=1e-6)   # waited for p0 (next slot)
    assert packed.first_start[1] == pytest.approx(1.0)
    # p0: 1 s alone, then its remaining (d - 1) s at PACK_SLOWDOWN x
    assert rp.jct[0] == pytest.approx(1.0 + (d - 1.0) * PACK_SLOWDOWN, rel=1e-6)
    # p1: packed until p0 ends, then alone
    packed_for = rp.jct[0] - 1.0
    assert rp.jct[1] == pytest.approx(packed_for + (d - packed_for / PACK_SLOWDOWN), rel=1e-6)


def test_packing_refuses_a_job_over_half_the_gpu_memory(monkeypatch):
    import job_scheduler.core.mechanisms as mechanisms
    monkeypatch.setattr(mechanisms, "job_gmem_gib", lambda params, batch: 50.0)
    jobs = [_job("p0", 0.0, gpus=1, size=32_000), _job("p1", 1.0, gpus=1, size=32_000)]
    sim = sharing_sim(_topo(gpus=1), jobs, make_policy("fifo"), pack=True)
    sim.run()
    assert sim.counts["packed"] == 0


def test_las_cannot_use_time_slicing_or_packing():
    with pytest.raises(ValueError, match="las"):
        sharing_sim(_topo(), _two_jobs(), make_policy("las"), time_slice=10.0)


def test_simulate_json_reports_grows_shrinks_time_slices_and_packed(tmp_path, capsys):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n" + "".join(
        f"  - {{name: j{i}, model: resnet18, dataset_size: {20000 * (i + 1)}, epochs: 1, "
        f"batch_size: 32, max_gpus: {1 + i % 2}, arrival: {i * 5}}}\n" for i in range(8)))
    out = {}
    for extra in ([], ["--time-slice", "60"], ["--pack"]):
        assert sluice_main(["simulate", "--workload", str(jobs), "--topology", "single-rack",
                            "--policies", "fifo,lyapunov,sluice", *extra, "--json",
                            "--preemption-cost", "measured"]) == 0
        out[" ".join(extra)] = json.loads(capsys.readouterr().out)["policies"]
    for mode, pols in out.items():
        for pol in pols.values():
            assert {"grows", "shrinks", "time_slices", "packed", "avg_jct"} <= set(pol)
    assert all(p["time_slices"] == 0 and p["packed"] == 0 for p in out[""].values())
    assert sluice_main(["simulate", "--workload", str(jobs), "--policies", "las",
                        "--time-slice", "60"]) == 2
    assert sluice_main(["simulate", "--workload", str(jobs), "--time-slice", "0"]) == 2
    assert sluice_main(["simulate", "--workload", str(jobs), "--pack-slowdown", "2"]) == 2


def test_a_quantum_shorter_than_the_restore_still_makes_progress():
    # vgg16 on 4 GPUs costs 21 s to suspend + resume; a 5-s quantum counts from the end
    # of the restore, so every turn trains 5 s and both jobs finish
    jobs = [_job("a", 0.0, size=400_000, model="vgg16"), _job("b", 1.0, size=400_000, model="vgg16")]
    sim = sharing_sim(_topo(), jobs, make_policy("fifo"), costs=PreemptionCosts(ROWS),
                           time_slice=5.0, network=False)
    sim.max_stalled_slots = 10_000
    r = sim.run()
    assert sim.counts["time-slice"] >= 2 and r.jobs == 2
    assert sim.charged_s == pytest.approx(21.0 * sim.counts["time-slice"])
