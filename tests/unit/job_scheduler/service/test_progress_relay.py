"""The one progress relay (job_scheduler/service/progress_relay.py) the scheduler service
runs for every executor that asks for it (``relays_progress``), whatever its kind."""

from __future__ import annotations

import time

from job_scheduler.core.estimator import Estimator
from job_scheduler.service.executors import Outcome
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.service.progress_relay import ProgressRelays
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.store import JobStore
from topologies import load_topology

TOPO = load_topology("two-rack")
JOBS = ("jobs:\n  - {name: a, model: resnet18, dataset_size: 1000, epochs: 1, batch_size: 32, "
        "max_gpus: 2}\n")


class Controller:
    def job_started(self, job, base_port=None):
        return {"SLUICE_CONTROLLER_URL": "http://127.0.0.1:9",
                "SLUICE_CONTROLLER_JOB_TOKEN": "tok-" + job.name}

    def job_ended(self, job):
        pass


class ToyExecutor:
    """Any executor: its workers write ps/worker<j>.log in the job's run directory."""

    def __init__(self, kind, root, relays):
        self.kind, self.root, self.relays_progress = kind, root, relays
        self.done: set[int] = set()

    def plan(self, job, decision, now):
        return {"executor": self.kind, "started_at": now,
                "run_dir": str(self.root / f"job-{job.id}")}

    def launch(self, job, env=None):
        return {"external_id": f"{self.kind}-{job.id}"}

    def poll(self, job, now):
        return Outcome("finished", now, 0) if job.id in self.done else None

    def learned(self, job):
        return {}

    def stop(self, job):
        pass


def _service(tmp_path, relays: bool):
    ex = ToyExecutor("toy", tmp_path / "runs", relays)
    svc = SchedulerService(JobStore(tmp_path / "s.db"), TOPO,
                           make_policy_step("fifo", TOPO, Estimator()), {"toy": ex}, "toy",
                           controller=Controller(), clock=time.time)
    return svc, ex


def test_the_service_relays_for_an_executor_that_asks_and_drops_it_at_the_end(tmp_path):
    svc, ex = _service(tmp_path, relays=True)
    svc.submit(JOBS, "t.yaml")
    svc.tick()
    job = svc.store.jobs()[0]
    assert job.state == "running" and job.id in svc.relays
    sent = []

    class Client:
        def progress(self, job_id, worker, batch, token):
            sent.append((job_id, worker, batch, token))
    svc.relays._relays[job.id].client = Client()
    log = tmp_path / "runs" / f"job-{job.id}" / "ps" / "worker0.log"
    log.parent.mkdir(parents=True)
    log.write_text("batch 1 loss 0 time_s 0.1\nbatch 2 loss 0 time_s 0.1\n")
    svc.tick()                                   # the poll steps the relay
    assert [(w, b, t) for _, w, b, t in sent] == [("w0", 2, "tok-a")]
    ex.done.add(job.id)
    svc.tick()
    assert svc.store.get(job.id).state == "finished" and job.id not in svc.relays
    svc.store.close()


def test_no_relay_for_an_executor_whose_workers_report_themselves(tmp_path):
    svc, _ = _service(tmp_path, relays=False)
    svc.submit(JOBS, "t.yaml")
    svc.tick()
    job = svc.store.jobs()[0]
    assert job.state == "running" and job.id not in svc.relays
    svc.store.close()


def test_a_job_without_the_controllers_url_or_token_gets_no_relay(tmp_path):
    relays = ProgressRelays()

    class Job:
        id, name, run_dir = 1, "a", str(tmp_path)
    relays.start(Job, {"SLUICE_CONTROLLER_JOB_TOKEN": "t"}, 1)
    relays.start(Job, {"SLUICE_CONTROLLER_URL": "http://x"}, 1)
    assert 1 not in relays and relays.step(1) == 0
    relays.start(Job, {"SLUICE_CONTROLLER_URL": "http://x", "SLUICE_CONTROLLER_JOB_TOKEN": "t"}, 1)
    assert 1 in relays
    relays.drop(1)
    assert 1 not in relays
