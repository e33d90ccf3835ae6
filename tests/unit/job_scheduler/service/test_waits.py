"""Why a queued job waits and when it starts: every queued job's reason (code and
sentence), its position and estimated start from the policy's dry run, a running job's
estimated end; over HTTP, in ``sluice jobs`` and on /metrics."""

from __future__ import annotations

import dataclasses
import http.client
import json

import yaml
from prometheus_client.parser import text_string_to_metric_families

from job_scheduler.core.estimator import Estimator
from job_scheduler.core.decisions import StartDecision
from job_scheduler.service.api import SchedulerHTTPServer
from job_scheduler.service.executors import SimulatedExecutor
from job_scheduler.service.jobs_text import one_job, table
from job_scheduler.service.metrics import metrics_text
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.slurm_executor import SlurmExecutor, SlurmJobOptions
from job_scheduler.service.store import JobRecord, JobStore
from job_scheduler.service.wait_forecast import REASON_CODES, slurm_pending
from slurm_client.parse import JobInfo
from sluice_common.placement import Placement
from topologies import load_topology, parse_topology

from support.fake_slurm import SPEC, FakeSlurm
from support.scheduler_service import job_file, make_service


class FakeClock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def fourteen_on_sixteen(tmp_path, policy="fifo"):
    clock = FakeClock()
    svc = make_service(tmp_path, policy=policy, clock=clock)
    svc.submit(job_file(*[f"j{i}" for i in range(14)], max_gpus=4), "f.yaml")
    svc.tick()
    return svc, clock


def test_fourteen_jobs_on_sixteen_gpus_each_queued_job_says_why_and_when(tmp_path):
    svc, clock = fourteen_on_sixteen(tmp_path)
    jobs = svc.waits.public_many(svc.store.jobs())
    queued = [j for j in jobs if j["state"] == "queued"]
    running = [j for j in jobs if j["state"] == "running"]
    assert len(queued) == 10 and len(running) == 4
    for j in queued:
        assert j["reason"]["code"] in REASON_CODES and j["reason"]["message"], j
        assert set(j["reason"]) == {"code", "message"}
    assert sorted(j["position"] for j in queued) == list(range(1, 11))
    by_pos = sorted(queued, key=lambda j: j["position"])
    starts = [j["estimated_start"] for j in by_pos]
    assert all(s is not None for s in starts) and starts == sorted(starts)
    assert by_pos[0]["reason"] == {"code": "gpus",
                                   "message": by_pos[0]["reason"]["message"]}
    assert by_pos[0]["reason"]["message"].startswith("waiting for 4 GPUs: 0 of 16 free")
    assert by_pos[3]["reason"]["code"] == "behind"
    assert "behind 3 jobs" in by_pos[3]["reason"]["message"]
    for j in running:
        assert j["reason"] is None and j["position"] is None
        assert j["estimated_end"] == j["expected_end"] == clock.t + 100.0
    # the simulated executor runs as the dry run predicted: FIFO, nothing arriving
    predicted = {j["id"]: j["estimated_start"] for j in queued}
    for _ in range(400):
        clock.t += 1.0
        svc.tick()
    actual = {r.id: r.started_at for r in svc.store.jobs() if r.id in predicted}
    assert actual == predicted


def test_the_forecast_is_taken_once_per_slot(tmp_path, monkeypatch):
    svc, clock = fourteen_on_sixteen(tmp_path)
    from job_scheduler.service import wait_forecast
    runs = []
    real = wait_forecast.dry_run
    monkeypatch.setattr(wait_forecast, "dry_run", lambda *a, **k: runs.append(1) or real(*a, **k))
    for _ in range(3):
        svc.waits.public_many(svc.store.jobs())
    assert len(runs) == 1
    clock.t += 1.0
    svc.tick()
    svc.waits.public_many(svc.store.jobs())
    assert len(runs) == 2
    svc.submit(job_file("late", max_gpus=4), "g.yaml")      # the queue changed: again
    late = [j for j in svc.waits.public_many(svc.store.jobs()) if j["name"] == "late"][0]
    assert len(runs) == 3 and late["position"] == 11


def test_over_http_and_in_sluice_jobs(tmp_path):
    svc, clock = fourteen_on_sixteen(tmp_path)
    server = SchedulerHTTPServer(("127.0.0.1", 0), svc).start()
    try:
        def get(path):
            conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
            conn.request("GET", path)
            resp = conn.getresponse()
            body = json.loads(resp.read())
            conn.close()
            return resp.status, body
        status, page = get("/jobs")
        assert status == 200
        queued = [j for j in page["jobs"] if j["state"] == "queued"]
        assert len(queued) == 10 and all(j["reason"]["code"] for j in queued)
        head = min(queued, key=lambda j: j["position"])
        status, one = get(f"/jobs/{head['id']}")
        assert status == 200 and one["reason"]["code"] == "gpus"
        assert one["position"] == 1 and one["estimated_start"] == clock.t + 100.0
        assert [e["kind"] for e in one["events"]] == ["queued"]
        status, doc = get("/openapi.json")
        schemas = doc["components"]["schemas"]
        assert {"code", "message"} <= set(schemas["WaitReason"]["properties"])
        assert {"position", "estimated_start", "estimated_end", "reason"} <= set(
            schemas["Job"]["properties"])
        assert schemas["WaitReason"]["properties"]["code"]["enum"] == list(REASON_CODES)
    finally:
        server.stop()
    lines = table(page["jobs"], clock.t)
    assert "REASON" in lines[0] and "EST. START" in lines[0]
    row = next(line for line in lines[1:] if line.split()[0] == str(head["id"]))
    assert " gpus " in row and "(+100s)" in row
    running = next(line for line in lines[1:] if " running " in line)
    assert " end " in running
    text = "\n".join(one_job(one, clock.t))
    assert "reason: gpus: waiting for 4 GPUs: 0 of 16 free" in text
    assert "position: 1 in the policy's order" in text
    assert "estimated start:" in text and "(in 100 s)" in text
    assert "events (1):" in text and "queued" in text and "controller:" in text


def test_lyapunov_waiting_with_gpus_free_names_its_terms(tmp_path):
    clock = FakeClock()
    svc = make_service(tmp_path, policy="lyapunov", clock=clock)
    svc.submit(job_file("a", "b", max_gpus=4), "f.yaml")
    svc.tick()             # Q takes the jobs in at this slot; Z is still 0: it waits
    assert svc.health()["free_gpus"] == 16 and not svc.store.jobs(["running"])
    jobs = {j["name"]: j for j in svc.waits.public_many(svc.store.jobs())}
    head = jobs["a"]["reason"]
    assert head["code"] == "policy", head
    assert "lyapunov" in head["message"] and "Q+Z" in head["message"]
    assert "C(" in head["message"] and "Z = " in head["message"]
    assert jobs["b"]["reason"]["code"] == "behind"
    # the dry run's start is the one the service then takes
    predicted = jobs["a"]["estimated_start"]
    while not svc.store.jobs(["running"]):
        clock.t += 1.0
        svc.tick()
    assert svc.store.get(jobs["a"]["id"]).started_at == predicted


def test_a_future_arrival_is_the_reason_and_bounds_the_estimate(tmp_path):
    clock = FakeClock()
    svc = make_service(tmp_path, clock=clock)
    svc.submit("jobs:\n  - {name: later, model: resnet18, dataset_size: 1000, epochs: 1, "
               "batch_size: 32, max_gpus: 2, arrival: 300}\n", "f.yaml")
    svc.tick()
    (job,) = svc.waits.public_many(svc.store.jobs())
    assert job["reason"]["code"] == "arrival" and "(in 300 s)" in job["reason"]["message"]
    assert job["position"] == 1 and job["estimated_start"] == clock.t + 300.0


def test_a_suspended_job_says_so(tmp_path):
    from support.sim_jobs import CONTENDED, TWO_GPUS
    topo = parse_topology(yaml.safe_load(TWO_GPUS))
    est = Estimator()
    clock = FakeClock()
    svc = SchedulerService(JobStore(tmp_path / "s.db"), topo,
                           make_policy_step("sluice", topo, est, slot=1.0),
                           {"simulated": SimulatedExecutor(lambda spec, d: 600.0)},
                           "simulated", clock=clock)
    svc.submit(CONTENDED, "contended")
    seen = None
    for _ in range(3000):
        svc.tick()
        waiting = [r for r in svc.store.jobs(["queued"]) if (r.resume or {}).get("suspends")]
        if waiting:
            seen = svc.waits.public(waiting[0])
            break
        clock.t += 1.0
    assert seen is not None, "the sluice policy suspended nothing"
    assert seen["reason"]["code"] == "suspended"
    assert "of its work left" in seen["reason"]["message"] and seen["position"] >= 1


def test_slurms_pending_reason_from_squeue(tmp_path):
    parts = [JobInfo(9, "RUNNING", "sluice-st0re-job-9-attempt-1", nodes=("h1",), het_job_id=9,
                     het_offset=0, batch_host="h1"),
             JobInfo(10, "RUNNING", "sluice-st0re-job-9-attempt-1", nodes=("h2",), het_job_id=9,
                     het_offset=1, batch_host="h2"),
             # a job a QOS limit holds, and one waiting for resources
             JobInfo(12, "PENDING", "exits3", reason="QOSMaxGRESPerUser", nodes=("h3",),
                     exit_code="3:0", batch_host="h3"),
             JobInfo(13, "PENDING", "waits", reason="Resources")]
    fake = FakeSlurm()
    for p in parts:
        fake.parts.setdefault(p.leader, []).append(p)
    ex = SlurmExecutor(fake, load_topology("two-rack"), tmp_path, SlurmJobOptions(batches=3))
    svc = make_service(tmp_path)
    got = {}
    for slurm_id in (13, 12):
        decision = StartDecision(slurm_id, Placement(str(slurm_id), ("h1",), ("h1",)))
        fields = ex.plan(JobRecord(slurm_id, 1, "j", SPEC, "queued", 0.0), decision, now=1.0)
        job = JobRecord(slurm_id, 1, "j", SPEC, "running", 0.0, executor="slurm",
                        placement=decision.placement_record(), started_at=1.0,
                        run_dir=fields["run_dir"], attempts=1, external_id=str(slurm_id))
        assert ex.poll(job, 2.0) is None                 # pending: still sluice's running
        job = dataclasses.replace(job, **ex.learned(job))
        got[slurm_id] = svc.waits.public(job)["reason"]
    assert got[13]["code"] == "slurm" and "Slurm's reason: Resources" in got[13]["message"]
    assert "Slurm job 13" in got[13]["message"]
    assert got[12]["code"] == "slurm" and "QOSMaxGRESPerUser" in got[12]["message"]
    assert slurm_pending("exit code 3") is None and slurm_pending(None) is None


def test_metrics_count_queued_jobs_by_reason(tmp_path):
    svc, _ = fourteen_on_sixteen(tmp_path)
    fams = {f.name: f for f in text_string_to_metric_families(metrics_text(lambda: svc))}
    got = {s.labels["reason"]: s.value for s in fams["sluice_scheduler_queued_jobs"].samples}
    assert set(got) == set(REASON_CODES)
    assert got["gpus"] == 1 and got["behind"] == 9
    assert sum(got.values()) == 10


def test_the_dry_run_is_bounded(tmp_path):
    svc, clock = fourteen_on_sixteen(tmp_path)
    svc.waits.max_jobs = 6
    jobs = [j for j in svc.waits.public_many(svc.store.jobs()) if j["state"] == "queued"]
    estimated = [j for j in jobs if j["estimated_start"] is not None]
    assert len(estimated) == 6 and sorted(j["position"] for j in jobs) == list(range(1, 11))
    assert all("no estimated start" in j["reason"]["message"]
               for j in jobs if j["estimated_start"] is None)
    svc.waits.max_jobs, svc.waits.max_slots = 500, 1
    clock.t += 1.0
    svc.tick()
    jobs = [j for j in svc.waits.public_many(svc.store.jobs()) if j["state"] == "queued"]
    # one slot decided: the first wave's start 99 s ahead is beyond it (FIFO skips to it)
    assert sum(j["estimated_start"] is not None for j in jobs) == 4


def test_a_read_never_waits_for_a_slot_in_progress(tmp_path):
    """A slot that suspends a real job holds the service while the job checkpoints: a
    GET then answers from the last forecast (within LOCK_WAIT_S), not after the slot."""
    import threading
    import time as wall
    from job_scheduler.service import waits as waits_module
    svc, clock = fourteen_on_sixteen(tmp_path)
    before = {j["id"]: j["estimated_start"] for j in svc.waits.public_many(svc.store.jobs())}
    clock.t += 1.0
    held, release = threading.Event(), threading.Event()

    def slot_in_progress():
        with svc.slot_lock:
            held.set()
            release.wait(30)
    worker = threading.Thread(target=slot_in_progress)
    worker.start()
    try:
        held.wait(10)
        began = wall.monotonic()
        during = {j["id"]: j["estimated_start"] for j in svc.waits.public_many(svc.store.jobs())}
        assert wall.monotonic() - began < waits_module.LOCK_WAIT_S + 2.0
        assert during == before
    finally:
        release.set()
        worker.join()


def test_one_job_shows_its_registration_at_the_controller():
    from job_scheduler.service.jobs_text import one_job
    base = {"id": 7, "name": "a", "state": "running", "started_at": 100.0, "events": []}
    pending = {**base, "controller": {"state": "pending", "id": "a.7",
                                      "error": "answered 500", "attempts": 3}}
    assert "  controller: pending as a.7, last error: answered 500 (3 attempts)" in \
        one_job(pending, 120.0)
    assert "  controller: registered as a.7 (1 attempt)" in one_job(
        {**base, "controller": {"state": "registered", "id": "a.7", "error": None,
                                "attempts": 1}}, 120.0)
    assert "  controller: none (the service has no controller)" in \
        one_job({**base, "controller": None}, 120.0)
    assert "  controller: not registered (not started)" in \
        one_job({**base, "state": "queued", "started_at": None}, 120.0)
