"""Time-slicing, grow/shrink at a resume point and packing of real PS jobs in the run
loop (job_scheduler.core.mechanisms composed in end_to_end.runloop), without a fabric: the hosts are loopback addresses, so
real ps-lite processes run on this machine under the real loop (as in
tests/unit/end_to_end/test_runloop_preemption.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from end_to_end.preemption_report import preemption_lines
from end_to_end.runloop import RealTimeRun
from end_to_end.run_options import RunOptions
from ps_runtime.checkpoint import resized_last_batch
from job_scheduler.core.mechanisms import MechanismOptions
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.placement import FirstFitPlacement
from job_scheduler.core.decisions import StartDecision
from job_scheduler.core.mechanisms import PACK_SLOWDOWN
from ps_runtime.plan import BLOCK
from ps_runtime.runners import LocalRunner
from ps_runtime.worker_overrides import WorkerOverrides
from sluice_common.jobspec import JobSpec
from topologies import load_topology
from end_to_end.result import iterations_of

EMULATED = {"*": WorkerOverrides(compute_s=0.03, bytes_per_batch=4096)}


class NoController:
    def links(self):
        return {"ports": []}


def one_host(tmp_path: Path, gpus: int):
    doc = {"name": "lo-one-host", "switches": [{"name": "t1", "role": "tor"}],
           "racks": [{"name": "r1", "tor": "t1"}],
           "hosts": [{"name": "h1", "rack": "r1", "gpus": gpus, "bw": 10000, "ip": "127.0.1.1"}]}
    path = tmp_path / "topo.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_topology(str(path))


def all_free(queued, state, now):
    """argmin C(n) when C falls with n (an ideal fabric): every free GPU up to max_gpus,
    in queue order."""
    out, state = [], state.copy()
    for q in queued:
        n = min(q.spec.max_gpus, state.total_free)
        if n == 0:
            break
        p = FirstFitPlacement().place(state, q.spec.name, n, q.spec.num_ps)
        state.allocate(p)
        out.append(StartDecision(q.id, p))
    return out


PORTS = 20 * BLOCK      # ps-lite ports for every launch of a test (relaunches included)


def _run(tmp_path, topology, jobs, port_base, **kw):
    options = RunOptions(priority=False, slot_s=0.5, compute="emulated",
                         worker_overrides=EMULATED,
                         job_timeout_s=240, port_base=port_base)
    loop = RealTimeRun(topology, jobs, all_free, Estimator(), None, NoController(),
                       tmp_path / "run", options, policy_name="test", runner=LocalRunner(),
                       mechanisms=MechanismOptions(**kw).build())
    return loop.run()


def _batches_done(job: dict) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for it in iterations_of(job):
        out.setdefault(it.worker, []).append(it.batch)
    return out


def test_a_resize_keeps_the_samples_left():
    assert resized_last_batch(10, 100, 2, 1) == 190       # 180 batches' samples on one
    assert resized_last_batch(10, 100, 2, 4) == 55        # 45 each on four
    assert resized_last_batch(10, 100, 3, 2) == 145       # ceil(270 / 2)


@pytest.mark.slow
def test_time_slice_suspends_then_resumes_the_job_on_the_gpus_left_a_shrink(tmp_path,
                                                                            free_port_base):
    """Two GPUs: `long` takes both; `short` (1 GPU) arrives; after a quantum `long`
    yields at a batch boundary; `short` takes one GPU and `long` resumes on the other
    from its checkpoint (2 -> 1 worker) and still runs every batch once."""
    jobs = [JobSpec(name="long", model="resnet18", dataset_size=2 * 4 * 200, epochs=1,
                    batch_size=4, max_gpus=2, arrival=0.0),
            JobSpec(name="short", model="resnet18", dataset_size=4 * 30, epochs=1,
                    batch_size=4, max_gpus=1, arrival=3.0)]
    result = _run(tmp_path, one_host(tmp_path, 2), jobs, time_slice=2.0,
                  port_base=free_port_base(PORTS))
    assert result["summary"]["finished"] == 2, result["jobs"]
    sliced = [p for p in result["preemptions"] if p["why"] == "time-slice"]
    assert [p["job"] for p in sliced] == ["long"]
    assert (sliced[0]["gpus"], sliced[0]["resume_gpus"]) == (2, 1)
    s = result["summary"]
    assert (s["time_slices"], s["shrinks"], s["grows"]) == (1, 1, 0)
    k = sliced[0]["batch"]
    long = {j["name"]: j for j in result["jobs"]}["long"]
    # two workers ran 1..k; the samples of 2 x (200 - k) batches are left, so the one
    # resumed worker runs k+1..k + 2 (200 - k)
    assert _batches_done(long) == {0: list(range(1, 400 - k + 1)), 1: list(range(1, k + 1))}
    assert long["batches"] == 400 - k
    report = "\n".join(preemption_lines(result))
    assert "1 time slice(s); resumed on more GPUs 0 time(s), on fewer 1 time(s)" in report
    assert "| time-slice |" in report and "| 2 -> 1 |" in report


@pytest.mark.slow
def test_pack_runs_two_jobs_on_one_gpu_the_packed_one_slowed(tmp_path, free_port_base):
    jobs = [JobSpec(name=f"p{i}", model="resnet18", dataset_size=4 * 60, epochs=1,
                    batch_size=4, max_gpus=1, arrival=float(i)) for i in range(2)]
    result = _run(tmp_path, one_host(tmp_path, 1), jobs, pack=True,
                  port_base=free_port_base(PORTS))
    assert result["summary"]["finished"] == 2, result["jobs"]
    assert result["summary"]["packed"] == 1
    assert result["packings"][0]["job"] == "p1" and result["packings"][0]["with"] == "p0"
    by = {j["name"]: j for j in result["jobs"]}
    assert by["p1"]["start"] < by["p0"]["finish"]        # it did not wait for p0's GPU
    # the packed job's emulated compute is slowed by the factor (its worker says so)
    log = (tmp_path / "run" / "jobs" / "p1").glob("worker0*.log")
    text = "".join(p.read_text() for p in log)
    assert f"compute {0.03 * PACK_SLOWDOWN * 1000:.2f} ms per batch" in text
