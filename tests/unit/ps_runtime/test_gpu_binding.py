"""GPUs by index, each worker on its own GPU.

The cluster state names which GPU indices of each host a job holds (the lowest free,
the same in every loop); the service's store keeps them across a restart, and a record
naming an index its host lacks fails that job alone; every worker process starts with
its own ``CUDA_VISIBLE_DEVICES`` and records the GPU it ran on; ``sluice demo``'s
``gpu_records`` are checked by ``end_to_end.gpu_records``."""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path

import pytest

from end_to_end.gpu_records import check_gpu_records, gpu_records, main as check_main
from job_scheduler.core.estimator import Estimator
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.service.executors import LocalExecutor, SimulatedExecutor
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.store import JobStore
from ps_runtime import gpu_binding
from ps_runtime.launcher import PSJob, WorkerOptions
from ps_runtime.plan import HostPlan
from ps_runtime.runners import LocalRunner
from sluice_common.jobspec import parse_jobs_text
from sluice_common.placement import GpuGrant, GpuIndexError, Placement
from topologies import load_topology

TOPO = load_topology("two-rack")          # 2 racks x 2 hosts x 4 GPUs
EST = Estimator()


def jobs_yaml(*names: str, gpus: int = 2, dataset: int = 1000) -> str:
    return "jobs:\n" + "".join(
        f"  - {{name: {n}, model: resnet18, dataset_size: {dataset}, epochs: 1, "
        f"batch_size: 32, max_gpus: {gpus}}}\n" for n in names)


# ---- the cluster state -----------------------------------------------------------------

def test_two_jobs_on_one_host_get_disjoint_lowest_indices_and_release_frees_them():
    state = ClusterState(TOPO)
    a = state.allocate(Placement("a", ("h1",), ("h1", "h1")))
    b = state.allocate(Placement("b", ("h1",), ("h1",)))
    assert a.as_dict() == {"h1": [0, 1]} and b.as_dict() == {"h1": [2]}
    assert state.holds("a") == a and state.free[0] == 1
    assert state.release(Placement("a", ("h1",), ("h1", "h1"))) == a
    c = state.allocate(Placement("c", ("h1",), ("h1",) * 3))
    assert c.as_dict() == {"h1": [0, 1, 3]}            # around b's GPU 2, which b keeps
    assert not set(c.on("h1")) & set(b.on("h1"))


def test_a_named_grant_is_taken_exactly_or_refused_before_anything_changes():
    state = ClusterState(TOPO)
    p = Placement("a", ("h2",), ("h2", "h2", "h3"))
    got = state.allocate(p, GpuGrant.of({"h2": [3, 1], "h3": [2]}))
    assert got.as_dict() == {"h2": [1, 3], "h3": [2]}
    before = (list(state.free), list(state.free_ids), dict(state.held))
    with pytest.raises(ValueError, match=r"h2: GPU\(s\) \[3\] already held"):
        state.allocate(Placement("b", ("h2",), ("h2",)), GpuGrant.of({"h2": [3]}))
    with pytest.raises(GpuIndexError, match="host h4 has no GPU index 7") as err:
        state.allocate(Placement("c", ("h4",), ("h4",)), GpuGrant.of({"h4": [7]}))
    assert (err.value.host, err.value.index) == ("h4", 7)
    assert (list(state.free), list(state.free_ids), dict(state.held)) == before


def test_a_tentative_release_and_allocate_keeps_the_jobs_own_indices():
    state = ClusterState(TOPO)
    state.allocate(Placement("x", ("h1",), ("h1", "h1")))
    held = state.allocate(Placement("y", ("h1",), ("h1", "h1")))          # 2, 3
    state.release(Placement("x", ("h1",), ("h1", "h1")))                 # 0, 1 free
    ids = state.release(Placement("y", ("h1",), ("h1", "h1")))           # as the regrow asks
    assert state.allocate(Placement("y", ("h1",), ("h1", "h1")), ids) == held
    copy = state.copy()
    copy.allocate(Placement("z", ("h1",), ("h1",)))
    assert state.holds("z") == GpuGrant() and state.free[0] == 2


def test_grant_per_worker_gives_the_kth_worker_of_a_host_its_kth_index():
    g = GpuGrant.of({"h2": [3, 0], "h1": [1]})
    assert g.per_worker(("h1", "h2", "h2")) == [1, 0, 3]
    with pytest.raises(ValueError, match="h1: 2 workers"):
        g.per_worker(("h1", "h1"))
    with pytest.raises(ValueError, match="distinct"):
        GpuGrant.of({"h1": [1, 1]})


# ---- the service's store ---------------------------------------------------------------

def service(tmp_path, store=None, executor="simulated"):
    executors = {"simulated": SimulatedExecutor(lambda spec, d: 1000.0, 1.0),
                 "local": LocalExecutor(tmp_path / "runs")}
    return SchedulerService(store or JobStore(tmp_path / "jobs.db"), TOPO,
                            make_policy_step("fifo", TOPO, EST), executors, executor,
                            clock=lambda: 1_000_000.0, max_retries=1)


def ids_of(svc) -> dict[str, dict]:
    return {j.name: j.placement["gpu_ids"] for j in svc.store.jobs(["running"])}


def test_a_restart_of_the_service_keeps_every_jobs_indices(tmp_path):
    svc = service(tmp_path)
    svc.submit(jobs_yaml("a", "b", "c", gpus=3), "f.yaml")
    svc.tick()
    before = ids_of(svc)
    assert before == {"a": {"h1": [0, 1, 2]}, "b": {"h1": [3], "h2": [0, 1]},
                      "c": {"h2": [2, 3], "h3": [0]}}
    svc.store.close()
    again = service(tmp_path)                     # a new process on the same store
    again.check_running_fit()
    state = again.cluster_state(again.store.jobs(["running"]))
    assert {j.name: state.holds(str(j.id)).as_dict() for j in again.store.jobs(["running"])} == before
    again.submit(jobs_yaml("d", gpus=2), "g.yaml")
    again.tick()
    assert ids_of(again)["d"] == {"h3": [1, 2]}   # none of the recovered indices
    assert {k: v for k, v in ids_of(again).items() if k != "d"} == before


def test_a_recorded_index_its_host_lacks_fails_that_job_alone(tmp_path, caplog):
    svc = service(tmp_path)
    svc.submit(jobs_yaml("good", "bad"), "f.yaml")
    svc.tick()
    good, bad = sorted(svc.store.jobs(["running"]), key=lambda j: j.name != "good")
    broken = {**bad.placement, "gpu_ids": {"h1": [2, 9]}}       # h1 has GPUs 0-3
    svc.store.update(bad.id, placement=broken)
    svc.store.close()
    again = service(tmp_path)
    again.check_running_fit()                     # the service still starts
    again.tick()
    after = again.store.get(bad.id)
    failure = [d for _, e, d in again.store.events(bad.id) if e == "retry"]
    assert len(failure) == 1 and "host h1 has no GPU index 9 (it has GPUs 0-3)" in failure[0]
    assert any("no GPU index 9" in r.message for r in caplog.records)
    # requeued by the retry policy and, in the same slot, started again on valid GPUs
    assert (after.state, after.attempts) == ("running", 2)
    assert after.placement["gpu_ids"] == {"h1": [2, 3]}
    kept = again.store.get(good.id)
    assert (kept.state, kept.placement, kept.attempts) == ("running", good.placement, 1)


def test_a_record_with_fewer_indices_than_workers_fails_that_job_alone(tmp_path):
    """A record whose indices do not match its workers (as a stale Slurm answer once
    wrote over a migrated job's) fails that job; every other slot goes on deciding."""
    svc = service(tmp_path)
    svc.submit(jobs_yaml("good", "bad"), "f.yaml")
    svc.tick()
    good, bad = sorted(svc.store.jobs(["running"]), key=lambda j: j.name != "good")
    (host, ids), = bad.placement["gpu_ids"].items()
    assert len(ids) == 2
    svc.store.update(bad.id, placement={**bad.placement, "gpu_ids": {host: ids[:1]}})
    svc.tick()                                    # before the check: ValueError, every slot
    failure = [d for _, e, d in svc.store.events(bad.id) if e == "retry"]
    assert len(failure) == 1 and f"{ids[:1]} on {host} for its 2 worker(s)" in failure[0]
    after = svc.store.get(bad.id)
    assert after.state == "running" and after.attempts == 2
    assert len(after.placement["gpu_ids"][host]) == 2
    assert svc.store.get(good.id).placement == good.placement


def test_a_record_holding_another_jobs_gpus_fails_that_job_alone(tmp_path, caplog):
    """Two records naming the same GPUs (a store edited by hand, a defect): the later
    job fails alone, the earlier keeps its GPUs, and the slot goes on (a ValueError in
    cluster_state must not stop every slot); a restart on that store still starts."""
    svc = service(tmp_path)
    svc.submit(jobs_yaml("first", "second"), "f.yaml")
    svc.tick()
    first, second = sorted(svc.store.jobs(["running"]), key=lambda j: j.id)
    svc.store.update(second.id, placement=first.placement)
    svc.store.close()
    again = service(tmp_path)
    again.check_running_fit()
    again.tick()
    failure = [d for _, e, d in again.store.events(second.id) if e == "retry"]
    assert len(failure) == 1 and "cannot be held beside the other running jobs'" in failure[0]
    assert any("cannot be held" in r.message for r in caplog.records)
    after, kept = again.store.get(second.id), again.store.get(first.id)
    assert (kept.state, kept.placement, kept.attempts) == ("running", first.placement, 1)
    assert after.state == "running" and after.attempts == 2     # requeued, placed anew
    held = {h: set(ids) for h, ids in kept.placement["gpu_ids"].items()}
    assert all(not held.get(h, set()) & set(ids)
               for h, ids in after.placement["gpu_ids"].items())


# ---- each worker on its own GPU --------------------------------------------------------

def test_the_launcher_binds_each_worker_and_hides_gpus_from_the_ps(tmp_path):
    (spec,) = parse_jobs_text(jobs_yaml("j"), "t.yaml")
    plan = HostPlan.loopback(1, 3).bound([2, 0, 3])
    job = PSJob(spec, plan, LocalRunner(), tmp_path, batches=1,
                options=WorkerOptions(compute="emulated"))
    procs = job._plan()
    envs = {p.name: job._env(p) for p in procs}
    assert [envs[f"worker{j}"]["CUDA_VISIBLE_DEVICES"] for j in range(3)] == ["2", "0", "3"]
    assert envs["server0"]["CUDA_VISIBLE_DEVICES"] == "" == envs["scheduler0"]["CUDA_VISIBLE_DEVICES"]
    assert envs["worker1"][gpu_binding.RAN_ON_ENV] == str(tmp_path / "ran_on" / "worker1.json")
    unbound = PSJob(spec, HostPlan.loopback(1, 1), LocalRunner(), tmp_path, batches=1,
                    options=WorkerOptions(compute="emulated"))
    assert all("CUDA_VISIBLE_DEVICES" not in unbound._env(p) for p in unbound._plan())


def test_a_warm_process_refuses_a_binding_once_cuda_is_initialised(monkeypatch):
    from ps_runtime.warm_process import check_gpu_binding

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))
    monkeypatch.setitem(sys.modules, "torch", fake)
    with pytest.raises(SystemExit, match="CUDA was initialised"):
        check_gpu_binding({"CUDA_VISIBLE_DEVICES": "2"})
    check_gpu_binding({"DMLC_ROLE": "server"})            # no binding asked: fine
    fake.cuda.is_initialized = lambda: False
    check_gpu_binding({"CUDA_VISIBLE_DEVICES": "2"})


def test_a_worker_records_its_host_and_gpu_merging_a_slurm_record(tmp_path, monkeypatch):
    record = tmp_path / "ran_on" / "worker0.json"
    record.parent.mkdir()
    record.write_text(json.dumps({"intended_host": "h3", "slurm_job_id": "12"}))
    monkeypatch.setenv(gpu_binding.RAN_ON_ENV, str(record))
    monkeypatch.delenv(gpu_binding.HOST_ENV, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    gpu_binding.record_worker(0, "emulated", "emulated")
    rec = json.loads(record.read_text())
    assert (rec["host"], rec["gpu"], rec["slurm_job_id"], rec["uuid"]) == ("h3", 3, "12", None)
    assert gpu_binding.gpus_by_host(gpu_binding.read_records(record.parent)) == {"h3": [3]}


def names_with_free_ports(n: int) -> list[str]:
    """Job names whose port blocks (``sluice train`` hashes the name; 7 ports: scheduler,
    4 servers, 2 workers) are free on this shared machine now."""
    from ps_runtime.cli import _port_busy
    from ps_runtime.plan import default_base_port

    out, k = [], 0
    while len(out) < n:
        name, k = f"bind{k}", k + 1
        if not any(_port_busy(p) for p in range(default_base_port(name), default_base_port(name) + 7)):
            out.append(name)
    return out


def test_local_executor_two_jobs_on_one_host_each_worker_on_the_decided_gpu(tmp_path):
    """Two real ``sluice train`` jobs (MXNet ps-lite, emulated compute here, torch on a
    GPU machine) on one 4-GPU host: disjoint GPU sets, and every worker process recorded
    the GPU the decision gave it."""
    left, right = names_with_free_ports(2)
    svc = service(tmp_path, executor="local")
    svc.submit(jobs_yaml(left, right, dataset=128), "f.yaml")
    svc.tick()
    decided = {j.name: j.placement["gpu_ids"] for j in svc.store.jobs(["running"])}
    assert decided == {left: {"h1": [0, 1]}, right: {"h1": [2, 3]}}
    runs = {j.name: Path(j.run_dir) for j in svc.store.jobs(["running"])}
    deadline = time.monotonic() + 180
    while svc.store.jobs(["running"]) and time.monotonic() < deadline:
        time.sleep(0.5)
        svc.tick()
    assert {j.name: j.state for j in svc.store.jobs()} == {left: "finished", right: "finished"}
    for name, run_dir in runs.items():
        recs = gpu_binding.read_records(run_dir / "ps" / "ran_on")
        assert len(recs) == 2
        # the local executor runs every worker on this machine ("local"): the indices
        # are the decision's host's, worker by worker
        assert sorted(r["gpu"] for r in recs) == decided[name]["h1"]
        assert all(r["CUDA_VISIBLE_DEVICES"] == str(r["gpu"]) for r in recs)


# ---- the demo's gpu_records ------------------------------------------------------------

def _pass(*jobs):
    return {"jobs": [{"name": n, "worker_hosts": hosts, "gpu_runs": runs} for n, hosts, runs in jobs]}


def test_gpu_records_checker_finds_shared_gpus_of_overlapping_jobs_and_miscounts(tmp_path):
    ok = gpu_records({"p": _pass(
        ("a", ["h1", "h1"], [{"start_s": 0, "end_s": 10, "gpus": {"h1": [0, 1]}}]),
        ("b", ["h1"], [{"start_s": 5, "end_s": 12, "gpus": {"h1": [2]}}]),
        ("c", ["h1"], [{"start_s": 10, "end_s": 20, "gpus": {"h1": [0]}}]))})  # after a
    assert [e["job"] for e in ok] == ["a", "b", "c"] and ok[0]["pass"] == "p"
    assert check_gpu_records(ok) == []
    bad = gpu_records({"p": _pass(
        ("a", ["h1", "h1"], [{"start_s": 0, "end_s": 10, "gpus": {"h1": [0, 1]}}]),
        ("b", ["h1", "h1"], [{"start_s": 5, "end_s": 12, "gpus": {"h1": [1]}}]))})
    problems = check_gpu_records(bad)
    assert any("share GPU(s) [1]" in p for p in problems)
    assert any("job b: host h1: GPUs [1] for 2 worker(s)" in p for p in problems)
    moved = gpu_records({"p": _pass(("a", ["h1"], [{"start_s": 0, "end_s": 1, "gpus": {"h1": [2]},
                                                     "decided": {"h1": [1]}}]))})
    assert check_gpu_records(moved) == ["pass p, job a: workers ran on {'h1': [2]}, decided {'h1': [1]}"]
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps({"gpu_records": bad}))
    assert check_main([str(path)]) == 1
    path.write_text(json.dumps({"gpu_records": ok}))
    assert check_main([str(path)]) == 0


def test_auto_compute_is_decided_by_each_worker_on_its_own_device(tmp_path):
    """``compute=auto``: the launcher hands each worker both command lines; the worker,
    bound to its GPU, chooses (torch on a usable CUDA device, else emulated: here)."""
    from ps_runtime.compute import cuda_present

    (name,) = names_with_free_ports(1)
    (spec,) = parse_jobs_text(jobs_yaml(name, dataset=64), "t.yaml")
    job = PSJob(spec, HostPlan.loopback(1, 2).bound([1, 3]), LocalRunner(), tmp_path,
                batches=2, options=WorkerOptions(compute="auto", threads=1))
    argv = job._argv(job._plan()[-1])
    assert argv[2:5] == ["ps_runtime.auto_worker", "--worker-index", "1"]
    assert json.loads(argv[5])[0:2] == ["--job", name] and "--compute-s" in json.loads(argv[6])
    with job:
        job.start()
        job.wait(timeout=120)
    recs = {r["rank"]: r for r in gpu_binding.read_records(tmp_path / "ran_on")}
    want = "torch" if cuda_present() else "emulated"
    assert [(recs[k]["gpu"], recs[k]["compute"]) for k in (0, 1)] == [(1, want), (3, want)]
    assert "decided on its own device (CUDA_VISIBLE_DEVICES=3)" in (tmp_path / "worker1.log").read_text()


def test_sluice_train_refuses_worker_gpus_that_do_not_match_its_workers(tmp_path, capsys):
    from sluice.cli import main as sluice

    f = tmp_path / "j.yaml"
    f.write_text(jobs_yaml("j"))
    assert sluice(["train", str(f), "--job", "j", "--workers", "2", "--worker-gpus", "0"]) == 2
    assert "--worker-gpus" in capsys.readouterr().err


def test_slurm_gpu_records_come_from_the_worker_steps_records(tmp_path):
    from end_to_end.gpu_records import slurm_gpu_records

    run = tmp_path / "job-1-attempt-1"
    (run / "ran_on").mkdir(parents=True)
    for name, host, gpu in (("worker0", "h1", 2), ("worker1", "h3", 0)):
        (run / "ran_on" / f"{name}.json").write_text(json.dumps(
            {"intended_host": host, "host": host, "role": "worker", "gpu": gpu}))
    (run / "ran_on" / "server-1.json").write_text(json.dumps({"role": "server", "gpu": None}))
    job = {"id": 1, "name": "j", "started_at": 110.0, "finished_at": 130.5,
           "placement": {"worker_hosts": ["h1", "h3"], "gpu_ids": {"h1": [2], "h3": [0]}}}
    (rec,) = slurm_gpu_records([job], {1: run}, t0=100.0)
    assert rec == {"pass": "slurm", "job": "j", "gpus": {"h1": [2], "h3": [0]}, "start_s": 10.0,
                   "end_s": 30.5, "workers": {"h1": 1, "h3": 1},
                   "decided": {"h1": [2], "h3": [0]}}
    assert check_gpu_records([rec]) == []


def test_sluice_jobs_shows_each_hosts_gpu_indices():
    from job_scheduler.service.jobs_text import placement_text

    record = {"ps_hosts": ["h1"], "gpus_by_host": {"h1": 2, "h2": 1},
              "gpu_ids": {"h1": [0, 3], "h2": [1]}}
    assert placement_text(record) == "h1:2[0,3],h2:1[1] ps=h1"
    assert placement_text({"ps_hosts": ["h1"], "gpus_by_host": {"h1": 2}}) == "h1:2 ps=h1"
