"""The durable scheduler service.

In-process tests drive ``SchedulerService`` slot by slot (fake clock where time matters);
the process tests run the real ``sluice scheduler`` on a loopback port with a temp
SQLite file and ``kill -9`` it: every acknowledged submission must survive, running jobs
must be reconciled, never forgotten.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from job_scheduler.core.estimator import Estimator
from sluice_common.jobspec import parse_jobs_text
from job_scheduler.service.scheduler import Conflict, SchedulerService
from job_scheduler.service.client import SchedulerClient, ServiceError
from job_scheduler.service.policy_step import SERVICE_POLICIES, make_policy_step
from job_scheduler.service.store import JobStore
from sluice_common.errors import InputError
from topologies import load_topology
from ps_runtime.ports import free_port

from support.paths import REPO as ROOT
from support.scheduler_service import job_file, make_service
from support.scheduler_process import SLUICE, ServiceProcess, wait_for
TOPO = load_topology("two-rack")
EST = Estimator()


class FakeClock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class RecordingController:
    def __init__(self):
        self.started, self.ended = [], []

    def job_started(self, job, base_port=None):
        self.started.append(job.name)
        return {"SLUICE_CONTROLLER_JOB_TOKEN": "t-" + job.name}

    def job_ended(self, job):
        self.ended.append(job.name)


# ---- in-process ------------------------------------------------------------------------

def test_bad_file_queues_nothing(tmp_path):
    svc = make_service(tmp_path)
    bad = job_file("ok") + "  - {name: broken, model: resnet18, epochs: 1}\n"
    with pytest.raises(InputError) as err:
        svc.submit(bad, "bad.yaml")
    assert "broken" in str(err.value) and "dataset_size" in str(err.value)
    with pytest.raises(InputError, match="could never run"):
        svc.submit(job_file("huge", max_gpus=TOPO.total_gpus + 1), "huge.yaml")
    assert svc.store.jobs() == []


def test_simulated_jobs_run_and_release_gpus(tmp_path):
    clock = FakeClock()
    svc = make_service(tmp_path, clock=clock)
    svc.submit(job_file(*[f"j{i}" for i in range(10)], max_gpus=4), "f.yaml")
    svc.tick()
    running = svc.store.jobs(["running"])
    assert len(running) == 4 and svc.health()["free_gpus"] == 0      # 16 GPUs / 4
    assert all(j.expected_end == clock.t + 100.0 for j in running)
    clock.t += 100.0
    svc.tick()
    assert svc.store.counts()["finished"] == 4 and len(svc.store.jobs(["running"])) == 4
    clock.t += 100.0
    svc.tick()                       # 2nd wave ends, the last 2 jobs start
    assert len(svc.store.jobs(["running"])) == 2
    clock.t += 100.0
    svc.tick()
    assert svc.store.counts() == {"queued": 0, "running": 0, "finished": 10, "failed": 0,
                                  "cancelled": 0}
    assert svc.health()["free_gpus"] == TOPO.total_gpus


@pytest.mark.parametrize("policy", SERVICE_POLICIES)
def test_simulator_policies_never_overcommit(tmp_path, policy):
    clock = FakeClock()
    svc = make_service(tmp_path, policy=policy, clock=clock)
    for k in range(6):
        svc.submit(job_file(*[f"j{k}-{i}" for i in range(5)], max_gpus=1 + (k * 3) % 8,
                            model=["resnet18", "vgg16", "alexnet"][k % 3]), f"f{k}.yaml")
    for _ in range(400):
        if svc.store.counts()["finished"] == 30:
            break
        svc.tick()
        used: dict[str, int] = {}
        for job in svc.store.jobs(["running"]):
            for host, n in job.gpus_by_host().items():
                used[host] = used.get(host, 0) + n
            assert 1 <= job.gpus <= job.spec.max_gpus
        assert all(used.get(h.name, 0) <= h.gpus for h in TOPO.hosts)
        clock.t += 20.0
    assert svc.store.counts()["finished"] == 30


def test_every_policy_is_offered_and_an_unknown_one_refused():
    assert make_policy_step("las", TOPO, EST).preemptive
    assert {"lyapunov", "fifo", "single", "random", "tetris", "las", "sluice"} <= \
        set(SERVICE_POLICIES)
    with pytest.raises(InputError, match="unknown policy 'lass'"):
        make_policy_step("lass", TOPO, EST)


def test_job_recorded_running_but_never_launched_is_requeued(tmp_path):
    """The service died between writing 'running' and starting the process: no pid,
    no pid file. The restarted service puts the job back in the queue (not an attempt)."""
    clock = FakeClock()
    svc = make_service(tmp_path, executor="local", command="true", clock=clock)
    (job_id,) = svc.submit(job_file("orphan"), "f.yaml").job_ids
    svc.store.update(job_id, state="running", executor="local", gpus=2, attempts=1,
                     started_at=clock.t, run_dir=str(tmp_path / "runs" / "never"),
                     placement={"ps_hosts": ["h1"], "worker_hosts": ["h1", "h1"],
                                "gpus_by_host": {"h1": 2}})
    clock.t += 30
    svc.store.close()
    again = make_service(tmp_path, executor="local", command="true", clock=clock)
    assert again.recover()["requeued"] == 1
    job = again.store.get(job_id)
    assert (job.state, job.attempts, job.gpus) == ("queued", 0, None)
    clock.t += 1
    again.tick()
    wait_for(lambda: (again.tick(), again.store.get(job_id).state == "finished")[1])


def test_restart_reconciles_simulated_jobs(tmp_path):
    clock = FakeClock()
    svc = make_service(tmp_path, clock=clock)
    svc.submit(job_file("long", max_gpus=2), "f.yaml")
    svc.tick()
    (job,) = svc.store.jobs(["running"])
    svc.store.close()
    # a new service on the same file, still before the job's end: still running
    clock.t += 50.0
    again = make_service(tmp_path, clock=clock)
    assert again.recover()["still_running"] == 1
    assert again.health()["free_gpus"] == TOPO.total_gpus - 2
    clock.t += 60.0
    again.store.close()
    third = make_service(tmp_path, clock=clock)     # restarted after the end time
    assert third.recover()["finished"] == 1
    done = third.store.get(job.id)
    assert done.state == "finished" and done.finished_at == job.expected_end
    assert third.health()["free_gpus"] == TOPO.total_gpus


def test_crashed_job_fails_releases_gpus_and_flows(tmp_path):
    ctl = RecordingController()
    svc = make_service(tmp_path, executor="local", controller=ctl,
                       command='test "$SLUICE_CONTROLLER_JOB_TOKEN" = t-{name} && '
                               'sleep 0.2 && test {name} != crash')
    svc.submit(job_file("ok", "crash", max_gpus=4), "f.yaml")
    svc.tick()
    assert svc.health()["free_gpus"] == TOPO.total_gpus - 8
    wait_for(lambda: (svc.tick(), not svc.store.jobs(["running"]))[1])
    ok, crash = svc.store.jobs()
    assert (ok.state, ok.exit_code) == ("finished", 0)
    assert (crash.state, crash.exit_code) == ("failed", 1)
    assert "exited with status 1" in crash.reason
    assert svc.health()["free_gpus"] == TOPO.total_gpus
    assert ctl.started == ["ok", "crash"] and sorted(ctl.ended) == ["crash", "ok"]


def test_retry_policy(tmp_path):
    svc = make_service(tmp_path, executor="local", command="exit 7", max_retries=1)
    svc.submit(job_file("flaky"), "f.yaml")
    wait_for(lambda: (svc.tick(), svc.store.jobs()[0].state == "failed")[1])
    (job,) = svc.store.jobs()
    assert job.attempts == 2 and job.exit_code == 7
    assert [e[1] for e in svc.store.events(job.id)] == ["queued", "started", "retry",
                                                        "started", "failed"]


def test_cancel_queued_and_running(tmp_path):
    ctl = RecordingController()
    svc = make_service(tmp_path, executor="local", command="sleep 30", controller=ctl)
    svc.submit(job_file("run", max_gpus=16) + "  - {name: wait, model: resnet18, "
               "dataset_size: 1000, epochs: 1, batch_size: 32, max_gpus: 1}\n", "f.yaml")
    svc.tick()
    run, wait = svc.store.jobs()
    assert (run.state, wait.state) == ("running", "queued")
    pid = svc.store.get(run.id).pid
    assert svc.cancel(wait.id).state == "cancelled"
    assert svc.cancel(run.id).state == "cancelled"
    wait_for(lambda: not Path(f"/proc/{pid}").exists()
             or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z")
    assert ctl.ended == ["run"]
    with pytest.raises(Conflict):
        svc.cancel(run.id)
    svc.tick()
    assert svc.health()["free_gpus"] == TOPO.total_gpus


# ---- the real service process ----------------------------------------------------------


@pytest.fixture
def services():
    started: list[ServiceProcess] = []
    yield started
    for s in started:
        s.stop()


def test_kill9_mid_stream_loses_no_acknowledged_submission(tmp_path, services):
    svc = ServiceProcess(tmp_path, "--slot", "0.05", "--time-factor", "0.001")
    services.append(svc.start())
    client = SchedulerClient(svc.url, timeout=5)
    acked: dict[str, list[int]] = {}
    duplicates: list[str] = []
    total = 200

    def stream():
        for i in range(total):
            name = f"s{i:03d}"
            # Like `sluice submit`: on a broken connection, retry with the same
            # idempotency key until the service is back.
            answer = client.submit(job_file(name, max_gpus=1 + i % 4), f"{name}.yaml",
                                   retry_seconds=30)
            acked[name] = answer["jobs"]
            if answer["duplicate"]:       # committed before the kill, ack lost in it
                duplicates.append(name)

    writer = threading.Thread(target=stream)
    writer.start()
    kills = 0
    for threshold in (50, 120):          # two kill -9 while submissions stream in
        wait_for(lambda: len(acked) >= threshold, timeout=30, interval=0.005)
        svc.kill9()
        kills += 1
        svc.start()
    writer.join(60)
    assert not writer.is_alive() and len(acked) == total

    jobs = {j["name"]: j for j in client.jobs()}
    lost = [n for n in acked if n not in jobs]
    assert lost == [], f"acknowledged but lost: {lost}"
    for name, ids in acked.items():
        assert [jobs[name]["id"]] == ids
    # none duplicated either (a retried submission was recognised by its key)
    assert len(client.jobs()) == total
    # and the scheduler went on running what it had
    wait_for(lambda: all(j["state"] == "finished" for j in client.jobs()), timeout=30)
    assert client.health()["free_gpus"] == TOPO.total_gpus
    assert kills == 2
    print(f"acknowledged {len(acked)}, acknowledged on retry after a kill: {len(duplicates)}")


def test_restart_reconciles_running_jobs(tmp_path, services):
    # local executor: 'ok' ends well and 'crash' fails while the service is down
    svc = ServiceProcess(tmp_path, "--slot", "0.05", "--executor", "local", "--policy", "fifo",
                         "--local-command", "sleep 1.5; test {name} != crash")
    services.append(svc.start())
    client = SchedulerClient(svc.url)
    client.submit(job_file("ok", "crash", "later", max_gpus=8), "f.yaml")
    wait_for(lambda: [j["state"] for j in client.jobs()] == ["running", "running", "queued"])
    svc.kill9()
    time.sleep(2.0)                     # both jobs end while nobody watches
    svc.start()
    # Normally both ended while the service was down; on a loaded machine a job's shell
    # may start late and still be running now, so give the reconciliation a few seconds.
    def both_ended():
        by_name = {j["name"]: j for j in client.jobs()}
        done = all(by_name[n]["state"] in ("finished", "failed") for n in ("ok", "crash"))
        return by_name if done else None

    jobs = wait_for(both_ended, timeout=15.0)
    assert jobs["ok"]["state"] == "finished" and jobs["ok"]["exit_code"] == 0
    assert jobs["crash"]["state"] == "failed" and jobs["crash"]["exit_code"] == 1
    # their 16 GPUs were released, so the queued job got them. It runs for 1.5 s: on a
    # loaded machine it may already have finished by the first look, so either state
    # shows it left the queue, and it must end well.
    later_id = jobs["later"]["id"]
    wait_for(lambda: client.job(later_id)["state"] in ("running", "finished"))
    later = wait_for(lambda: (j := client.job(later_id))["state"] == "finished" and j,
                     timeout=15.0)
    assert later["exit_code"] == 0 and later["attempts"] == 1


def test_restart_while_simulated_job_runs(tmp_path, services):
    # fifo gives the job its 2 GPUs on one host (no fabric; its 2 flows share the host's
    # 100 Gbit/s bus); a time factor makes C(2) 10 s of wall time, long enough to
    # outlive a restart on a busy host with two cores.
    (spec,) = parse_jobs_text(job_file("sim"))
    factor = 10.0 / EST.C(spec, 2, 50_000.0)
    svc = ServiceProcess(tmp_path, "--slot", "0.05", "--policy", "fifo",
                         "--time-factor", repr(factor))
    services.append(svc.start())
    client = SchedulerClient(svc.url)
    (job_id,) = client.submit(job_file("sim"), "f.yaml")["jobs"]
    job = wait_for(lambda: (j := client.job(job_id))["state"] == "running" and j)
    assert job["expected_end"] - job["started_at"] == pytest.approx(10.0, abs=1e-6)
    svc.kill9()
    svc.start()
    assert time.time() < job["expected_end"]
    assert client.job(job_id)["state"] == "running"             # remembered, still running
    assert client.health()["free_gpus"] == TOPO.total_gpus - 2
    done = wait_for(lambda: (j := client.job(job_id))["state"] == "finished" and j, timeout=30)
    assert done["finished_at"] == job["expected_end"]
    assert client.health()["free_gpus"] == TOPO.total_gpus


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(SLUICE + list(args), cwd=ROOT, capture_output=True, text=True,
                          timeout=30, env=env)


def test_cli_auth_limits_cancel_and_bad_input(tmp_path, services):
    svc = ServiceProcess(tmp_path, "--slot", "0.05", "--time-factor", "1000",
                         token="s3cret-scheduler-token")     # 16+ characters (the minimum)
    services.append(svc.start())
    env_without = {k: v for k, v in os.environ.items() if k != "SLUICE_SCHEDULER_TOKEN"}
    env_with = {**env_without, "SLUICE_SCHEDULER_TOKEN": "s3cret-scheduler-token"}
    good = tmp_path / "good.yaml"
    good.write_text(job_file("g1", "g2"))
    bad = tmp_path / "bad.yaml"
    bad.write_text(job_file("b1") + "  - {name: b2, model: resnet18, dataset_size: lots, "
                   "epochs: 1, batch_size: 32, max_gpus: 1}\n")

    # unauthenticated submit is refused, by the CLI and on the wire
    r = run_cli("submit", str(good), "--server", svc.url, env=env_without)
    assert r.returncode == 1 and "token" in r.stderr
    with pytest.raises(ServiceError) as err:
        SchedulerClient(svc.url, token="wrong").submit(good.read_text())
    assert err.value.status == 401

    # bad YAML: exit 2 naming file, job and field; nothing queued
    r = run_cli("submit", str(bad), "--server", svc.url, env=env_with)
    assert r.returncode == 2
    assert "bad.yaml" in r.stderr and "b2" in r.stderr and "dataset_size" in r.stderr
    # the server rejects the whole file too when the client does not check
    with pytest.raises(ServiceError) as err:
        SchedulerClient(svc.url, token="s3cret-scheduler-token").submit(bad.read_text(),
                                                                        "bad.yaml")
    assert err.value.status == 400 and err.value.body["field"] == "dataset_size"
    assert SchedulerClient(svc.url).jobs() == []

    # too large: 413 from the headers alone, the body is never read
    conn = http.client.HTTPConnection("127.0.0.1", svc.port, timeout=5)
    conn.putrequest("POST", "/submissions")
    conn.putheader("Authorization", "Bearer s3cret-scheduler-token")
    conn.putheader("Content-Length", str((1 << 20) + 1))
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and "limit" in json.loads(resp.read())["error"]
    conn.close()

    r = run_cli("submit", str(good), "--server", svc.url, env=env_with)
    assert r.returncode == 0, r.stderr
    r = run_cli("jobs", "--server", svc.url, "--json")
    jobs = json.loads(r.stdout)
    assert [j["name"] for j in jobs] == ["g1", "g2"]
    wait_for(lambda: all(j["state"] == "running" for j in SchedulerClient(svc.url).jobs()))
    r = run_cli("cancel", str(jobs[0]["id"]), "--server", svc.url, env=env_with)
    assert r.returncode == 0, r.stderr
    r = run_cli("jobs", "--server", svc.url)
    assert r.returncode == 0
    lines = {line.split()[1]: line.split()[2] for line in r.stdout.splitlines()[1:]}
    assert lines == {"g1": "cancelled", "g2": "running"}
    assert "s3cret-scheduler-token" not in svc.log.read_text()          # never logged


def test_second_service_on_same_store_is_refused(tmp_path, services, capsys, monkeypatch):
    from sluice.cli import main

    first = ServiceProcess(tmp_path, "--slot", "0.5")
    services.append(first.start())
    r = run_cli("scheduler", "--listen", f"127.0.0.1:{free_port()}", "--db", str(first.db))
    assert r.returncode == 2 and "another scheduler service" in r.stderr
    # refused arguments (checked in-process: they never get to serve)
    assert main(["scheduler", "--listen", f"127.0.0.1:{first.port}",
                 "--db", str(tmp_path / "other.db")]) == 2
    assert "--listen" in capsys.readouterr().err
    assert not (tmp_path / "other.db").exists()        # a refused start leaves nothing
    monkeypatch.delenv("SLUICE_SCHEDULER_TOKEN", raising=False)
    assert main(["scheduler", "--listen", "0.0.0.0:0", "--db", str(tmp_path / "x.db")]) == 2
    assert "without a token" in capsys.readouterr().err
    assert main(["scheduler", "--policy", "fifo", "--V", "2", "--db", str(tmp_path / "x.db")]) == 2
    assert "--V" in capsys.readouterr().err
    assert not (tmp_path / "x.db").exists()


def test_controller_learns_job_endpoints_and_forgets_crashed_job(tmp_path, monkeypatch):
    """Against the real northbound API (controller logic on a fake flow table): a started
    job's endpoints are registered, and a worker crash removes the job and its rules."""
    from controller.api import ApiServer
    from support.controller_fakes import ADMIN, make_service as make_controller
    from controller.fake_fabric import bring_up
    from job_scheduler.service.controller_link import ControllerNotifier

    ctl = bring_up(make_controller("two-rack"))
    api = ApiServer(ctl, "127.0.0.1", 0).start()
    try:
        monkeypatch.setenv("SLUICE_CONTROLLER_TOKEN", ADMIN)
        notifier = ControllerNotifier(api.url, TOPO)
        flag = tmp_path / "crash-now"
        svc = make_service(tmp_path, executor="local", controller=notifier,
                           command=f'test -n "$SLUICE_CONTROLLER_JOB_TOKEN" || exit 9; '
                                   f'test -z "$SLUICE_CONTROLLER_TOKEN" || exit 8; '   # no admin token
                                   f'while [ ! -e {flag} ]; do sleep 0.05; done; exit 3')
        svc.submit(job_file("cross", max_gpus=6), "f.yaml")   # 6 GPUs: more than one host
        svc.tick()
        (job,) = svc.store.jobs(["running"])
        (registered,) = notifier.client.jobs()
        hosts = {h.ip: h.name for h in TOPO.hosts}
        assert registered["id"] == f"cross.{job.id}"      # its submission's own identity
        assert sorted(hosts[w["ip"]] for w in registered["workers"]) == \
            sorted(job.placement["worker_hosts"])
        assert [hosts[s["ip"]] for s in registered["servers"]] == job.placement["ps_hosts"]
        cookie = int(registered["cookie"], 16)
        assert any(r["cookie"] == cookie for r in _rules(notifier))
        flag.touch()                                     # the worker crashes
        wait_for(lambda: (svc.tick(), svc.store.get(job.id).state == "failed")[1])
        assert svc.store.get(job.id).exit_code == 3
        assert notifier.client.jobs() == []
        assert not any(r["cookie"] == cookie for r in _rules(notifier))
        assert svc.health()["free_gpus"] == TOPO.total_gpus
    finally:
        api.stop()


def _rules(notifier):
    out = []
    for r in notifier.client.rules():
        c = r.get("cookie")
        out.append({**r, "cookie": int(c, 16) if isinstance(c, str) else c})
    return out


@pytest.mark.slow
def test_real_ps_worker_crash_fails_job_and_cleans_up(tmp_path, monkeypatch):
    """The failure policy end to end: a real PS job (``sluice train``: MXNet ps-lite server and
    workers on loopback) reporting progress to the controller; one worker is SIGKILLed
    mid-job. The job is marked failed with the launcher's reason, its GPUs are released,
    the controller forgets it, and no process of the job is left."""
    from controller.api import ApiServer
    from support.controller_fakes import ADMIN, make_service as make_controller
    from controller.fake_fabric import bring_up
    from job_scheduler.service.controller_link import ControllerNotifier

    ctl = bring_up(make_controller("two-rack"))
    api = ApiServer(ctl, "127.0.0.1", 0).start()
    try:
        monkeypatch.setenv("SLUICE_CONTROLLER_TOKEN", ADMIN)
        notifier = ControllerNotifier(api.url, TOPO)
        svc = make_service(tmp_path, executor="local", controller=notifier)  # sluice train
        svc.submit("jobs:\n  - {name: victim, model: smallcnn, dataset_size: 320000, "
                   "epochs: 1, batch_size: 32, max_gpus: 2}\n", "victim.yaml")
        svc.tick()
        (job,) = svc.store.jobs(["running"])
        worker_log = Path(job.run_dir) / "ps" / "worker1.log"
        wait_for(lambda: worker_log.exists() and "\nbatch 3 " in worker_log.read_text(),
                 timeout=90, interval=0.2)
        # progress reached the controller through the job token the service handed over
        wait_for(lambda: notifier.client.jobs()[0]["batches"], timeout=10)
        # sluice train's worker: emulated compute without a GPU, torch with one; it
        # reports under the job's identity at the controller (NAME.ID)
        victim = rf"ps_runtime\.(emulated_)?worker --job victim\.{job.id} --worker-index 1"
        pids = subprocess.run(["pgrep", "-f", victim],
                              capture_output=True, text=True).stdout.split()
        assert len(pids) == 1
        os.kill(int(pids[0]), signal.SIGKILL)
        wait_for(lambda: (svc.tick(), svc.store.get(job.id).state != "running")[1], timeout=30)
        failed = svc.store.get(job.id)
        assert failed.state == "failed" and failed.exit_code == 1
        assert "worker 1" in (Path(job.run_dir) / "output.log").read_text()
        assert svc.health()["free_gpus"] == TOPO.total_gpus
        assert notifier.client.jobs() == []
        wait_for(lambda: subprocess.run(["pgrep", "-f", "--", "--job victim"],
                                        capture_output=True).returncode == 1, timeout=10)
    finally:
        api.stop()


def test_store_failure_is_not_acknowledged(tmp_path):
    """A submission the store could not write gets 503 (never 201), nothing is queued,
    and the client's retry with the same key succeeds once the store is back."""
    import sqlite3

    from job_scheduler.service.api import SchedulerHTTPServer

    svc = make_service(tmp_path)
    real_add = svc.store.add_submission
    failures = [sqlite3.OperationalError("database or disk is full")]

    def flaky_add(*args, **kwargs):
        if failures:
            raise failures.pop()
        return real_add(*args, **kwargs)

    svc.store.add_submission = flaky_add
    server = SchedulerHTTPServer(("127.0.0.1", 0), svc)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = SchedulerClient(f"http://127.0.0.1:{server.server_address[1]}")
        failures.append(sqlite3.OperationalError("database or disk is full"))
        with pytest.raises(ServiceError) as err:
            client.submit(job_file("x"), "x.yaml")
        assert err.value.status == 503 and "disk is full" in err.value.body["error"]
        assert svc.store.jobs() == []
        answer = client.submit(job_file("y"), "y.yaml", retry_seconds=5)   # 503, then ok
        assert not failures and [j.name for j in svc.store.jobs()] == ["y"]
        assert answer["jobs"] == [svc.store.jobs()[0].id]
    finally:
        server.shutdown()
        server.server_close()


def test_restart_with_a_topology_that_lacks_running_hosts_is_refused(tmp_path):
    svc = make_service(tmp_path)
    svc.submit(job_file("big", max_gpus=16), "f.yaml")
    svc.tick()
    svc.store.close()
    small = SchedulerService(JobStore(tmp_path / "jobs.db"), load_topology("leaf-spine:leaves=2,spines=1,hosts_per_leaf=1"),
                             make_policy_step("fifo", TOPO, EST), {"simulated": None}, "simulated")
    with pytest.raises(InputError, match="topology"):
        small.check_running_fit()
    small.store.close()


# ---- property: any interleaving of submit / cancel / slot / restart --------------------

_ops = st.lists(st.one_of(
    st.tuples(st.just("submit"), st.lists(st.integers(1, 16), min_size=1, max_size=4)),
    st.tuples(st.just("cancel"), st.integers(0, 40)),
    st.tuples(st.just("tick"), st.floats(0, 300)),
    st.tuples(st.just("restart"), st.sampled_from(["lyapunov", "fifo", "tetris"])),
), min_size=1, max_size=25)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_any_interleaving_keeps_jobs_and_gpus_consistent(tmp_path_factory, ops):
    tmp = tmp_path_factory.mktemp("prop")
    clock = FakeClock()
    svc = make_service(tmp, policy="lyapunov", clock=clock)
    acked: set[int] = set()
    terminal: dict[int, str] = {}
    counter = 0
    for op, arg in ops:
        if op == "submit":
            names = [f"p{counter + i}" for i in range(len(arg))]
            counter += len(arg)
            text = "jobs:\n" + "".join(
                f"  - {{name: {n}, model: resnet18, dataset_size: 1000, epochs: 1, "
                f"batch_size: 32, max_gpus: {g}}}\n" for n, g in zip(names, arg))
            acked.update(svc.submit(text, "p.yaml").job_ids)
        elif op == "cancel":
            ids = sorted(acked)
            if ids:
                try:
                    svc.cancel(ids[arg % len(ids)])
                except Conflict:
                    assert ids[arg % len(ids)] in terminal
        elif op == "tick":
            clock.t += arg
            svc.tick()
        else:
            svc.store.close()
            svc = make_service(tmp, policy=arg, clock=clock)
            svc.recover()
        jobs = {j.id: j for j in svc.store.jobs()}
        assert set(jobs) == acked                          # nothing lost, nothing extra
        used: dict[str, int] = {}
        for j in jobs.values():
            if j.state == "running":
                for h, n in j.gpus_by_host().items():
                    used[h] = used.get(h, 0) + n
        assert all(used.get(h.name, 0) <= h.gpus for h in TOPO.hosts)
        for jid, state in terminal.items():                # ended jobs stay ended
            assert jobs[jid].state == state
        terminal.update({j.id: j.state for j in jobs.values()
                         if j.state in ("finished", "failed", "cancelled")})
    for _ in range(200):                                   # drain: everything ends
        if all(j.state in ("finished", "cancelled") for j in svc.store.jobs()):
            break
        clock.t += 500
        svc.tick()
    assert all(j.state in ("finished", "cancelled") for j in svc.store.jobs())
    assert svc.health()["free_gpus"] == TOPO.total_gpus
    svc.store.close()


def test_a_large_file_with_every_check_slot_taken_gets_429_and_the_client_retries(
        tmp_path, monkeypatch):
    """Every slot for checking a large job file taken: 429 with Retry-After (a 4xx: the
    client sends too much at once, nothing is wrong with the service), nothing queued;
    the client's retry with the same key gets it in once a slot is free."""
    from job_scheduler.service import submission_check
    from job_scheduler.service.api import SchedulerHTTPServer

    monkeypatch.setattr(submission_check, "SLOT_WAIT_S", 0.05)
    svc = make_service(tmp_path)
    server = SchedulerHTTPServer(("127.0.0.1", 0), svc)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    big = job_file("big") + "#" + "x" * submission_check.LARGE_BODY + "\n"
    taken = [submission_check._slots.acquire(blocking=False)
             for _ in range(submission_check.MAX_CHECKS_AT_ONCE)]
    try:
        assert all(taken)
        client = SchedulerClient(f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(ServiceError) as err:
            client.submit(big, "big.yaml")
        assert err.value.status == 429 and "retry" in err.value.body["error"]
        assert svc.store.jobs() == []
        held, taken = taken, []
        threading.Timer(0.5, lambda: [submission_check._slots.release() for _ in held]).start()
        answer = client.submit(big, "big.yaml", retry_seconds=10)        # 429, then ok
        assert [j.name for j in svc.store.jobs()] == ["big"] and len(answer["jobs"]) == 1
    finally:
        for _ in taken:
            submission_check._slots.release()
        server.shutdown()
        server.server_close()
