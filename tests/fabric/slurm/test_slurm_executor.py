"""`sluice scheduler --executor slurm` on a real Slurm 22.05 cluster on the Mininet fabric
(the ``slurm_fabric`` fixture: the sluice controller, the two-rack fabric, munged,
slurmctld and one slurmd per Mininet host). Jobs are submitted with `sluice submit`;
every PS and worker process reports where it ran; the controller's rules on the switches
show the jobs' push and pull packets; then the faults a Slurm site meets: a foreign sbatch job
holding GPUs, a drained node, kill -9 of the scheduler, kill -9 of slurmctld, a slurmd
killed under a job. Jobs are tiny (emulated compute, a few batches)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from ps_runtime.plan import HostPlan, PortPlan
from job_scheduler.service.slurm_names import store_tag
from support.slurm_scheduler import (SLURM_TOPOLOGY, Scheduler, ran_on, run_dir, slurm,
                                     start_foreign_job, tiny)

pytestmark = pytest.mark.fabric
class FlowWatch:
    """Samples, while jobs run, the controller's view (``/flows``: each registered job's
    push and pull flows with the rules installed for them, under the job's cookie) and the
    switches' counters of those rules (``ovs-ofctl dump-flows``): a flow counts as seen
    and classified when a rule with its job's cookie matching its destination carried
    packets."""

    def __init__(self, env):
        from controller.client import ControllerClient

        self.fabric = env.fabric
        self.client = ControllerClient(env.controller_api, admin_token=env.admin_token)
        self.classified: dict[tuple[str, int], tuple[str, str, set]] = {}  # dst -> job, kind, cookies
        self.counted: set[tuple[str, str, int]] = set()   # (cookie, dst ip, dst port), packets > 0
        self.progress: dict[str, int] = {}        # job -> highest batch the controller had
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self):
        switches = [s.name for s in self.fabric.topology.switches]
        while not self._stop.is_set():
            try:
                flows = self.client.flows()["flows"]
            except Exception:
                flows = []
            for f in flows:
                if f.get("batch") is not None:
                    self.progress[f["job"]] = max(self.progress.get(f["job"], 0), f["batch"])
                cookies = {r["cookie"] for r in f["rules"]}
                if cookies:
                    job, kind, known = self.classified.get((f["dst"], f["dst_port"]),
                                                           (f["job"], f["kind"], set()))
                    self.classified[(f["dst"], f["dst_port"])] = (job, kind, known | cookies)
            for sw in switches:
                for line in self.fabric.dump_flows(sw).splitlines():
                    n = re.search(r"n_packets=(\d+)", line)
                    cookie = re.search(r"cookie=(0x[0-9a-f]+)", line)
                    dst = re.search(r"nw_dst=([\d.]+)", line)
                    port = re.search(r"tp_dst=(\d+)", line)
                    if n and cookie and dst and port and int(n.group(1)) > 0:
                        self.counted.add((cookie.group(1), dst.group(1), int(port.group(1))))
            self._stop.wait(0.2)

    def seen(self, job: str, kind: str, dst: tuple[str, int]) -> bool:
        got = self.classified.get(dst)
        if got is None or got[0] != job or got[1] != kind:
            return False
        return any((c, *dst) in self.counted for c in got[2])


def expected_flows(env, job: dict) -> tuple[set, set]:
    """The job's push destinations (server ip, port) and its cross-host pull destinations
    (worker ip, port), from the ports the launcher gives it (ps_runtime.plan)."""
    p = job["placement"]
    hosts = HostPlan.on_hosts(env.topology, p["ps_hosts"], p["worker_hosts"])
    ports = PortPlan.for_job(job["name"], hosts)
    push = {(n.ip, ports.server(i)) for i, n in enumerate(hosts.servers)}
    pull = {(n.ip, ports.worker(j)) for j, n in enumerate(hosts.workers)
            if n.ip not in {s.ip for s in hosts.servers}}
    return push, pull


# ---- the happy path ------------------------------------------------------------------------

def test_jobs_run_where_decided_and_the_controller_classifies_their_flows(slurm_fabric,
                                                                          sched_factory):
    env = slurm_fabric
    sched = sched_factory()
    with FlowWatch(env) as watch:
        ids = sched.submit([tiny("sa", 2), tiny("sb", 6), tiny("sc", 5)])
        jobs = sched.wait(list(ids))
    squeue = {p.leader: p for p in slurm(env).jobs([int(j["external_id"]) for j in jobs.values()])}
    for name, job in jobs.items():
        assert job["executor"] == "slurm" and job["attempts"] == 1
        # sluice's view agrees with Slurm's
        assert squeue[int(job["external_id"])].state == "COMPLETED", name
        p = job["placement"]
        where = ran_on(sched, job)
        workers = [where[f"worker{j}"] for j in range(len(p["worker_hosts"]))]
        assert [w["hostname"] for w in workers] == p["worker_hosts"], name
        assert [w["ip"] for w in workers] == [env.ip(h) for h in p["worker_hosts"]], name
        ps = [v for k, v in where.items() if not k.startswith("worker")]
        assert {v["role"] for v in ps} == {"scheduler", "server"}
        assert {v["hostname"] for v in ps} == {p["ps_hosts"][0]}, name
        assert all(v["ip"] == env.ip(v["hostname"]) for v in where.values())
        # each process ran inside this Slurm job (a component's id: leader + offset)
        parts = len(set(p["worker_hosts"]) | set(p["ps_hosts"]))
        assert all(int(v["slurm_job_id"]) - int(job["external_id"]) in range(parts)
                   for v in where.values()), where
    spanning = [j for j in jobs.values() if len(set(j["placement"]["worker_hosts"])) > 1]
    assert spanning, "a job must cross hosts (sb asks for 6 GPUs of 4-GPU hosts)"
    for job in spanning:
        push, pull = expected_flows(env, job)
        assert pull, job["placement"]
        for kind, dsts in (("push", push), ("pull", pull)):
            unseen = [d for d in dsts if not watch.seen(f"{job['name']}.{job['id']}", kind, d)]
            assert not unseen, (f"{job['name']}: {kind} flows to {unseen} not classified "
                                f"with packets: {watch.classified} {watch.counted}")
        # the controller had the job's progress, from the workers themselves: the
        # nodes reach its API over the fabric's management network (nothing relays it)
        # (the controller knows the job as NAME.ID: its submission's own identity)
        assert watch.progress.get(f"{job['name']}.{job['id']}", 0) >= 1, watch.progress
        for j in range(len(job["placement"]["worker_hosts"])):
            log = (run_dir(sched, job) / "ps" / f"worker{j}.log").read_text(errors="replace")
            assert "cannot reach the controller" not in log, (job["name"], j, log[-500:])


# ---- capacity: foreign jobs and drained nodes ---------------------------------------------

def test_foreign_gpus_and_drained_nodes_are_respected(slurm_fabric, sched_factory):
    env = slurm_fabric
    cli_env = {**os.environ, **env.cluster.env}
    foreign_id = start_foreign_job(env, 4)
    env.cluster.drain("h2", "sluice test: maintenance")
    sched = sched_factory(batches=20)
    ids = sched.submit([tiny("f1", 4), tiny("f2", 4), tiny("f3", 4)])
    # two 4-GPU jobs fit (h3, h4); the third waits: h1's GPUs are someone else's, h2 drained
    jobs = sched.wait(["f1", "f2"], states=("running", "finished"))
    time.sleep(2.0)
    jobs = sched.jobs()
    placed = {n: set(j["placement"]["gpus_by_host"]) for n, j in jobs.items() if j["placement"]}
    assert {h for hs in placed.values() for h in hs} <= {"h3", "h4"}, placed
    if jobs["f1"]["state"] == "running" and jobs["f2"]["state"] == "running":
        assert jobs["f3"]["state"] == "queued"
    subprocess.run(["scancel", str(foreign_id)], env=cli_env, check=True)
    jobs = sched.wait(list(ids), timeout=120)
    for name, job in jobs.items():
        assert "h2" not in job["placement"]["gpus_by_host"], (name, job["placement"])
        assert "h2" not in {v["hostname"] for v in ran_on(sched, job).values()}
    env.cluster.resume("h2")


# ---- the cluster's own description -------------------------------------------------------

def test_topology_from_slurm_and_validate_against_it(slurm_fabric, tmp_path):
    import yaml

    env = slurm_fabric
    cli_env = {**os.environ, **env.cluster.env}
    out = tmp_path / "from-slurm.yaml"
    r = subprocess.run([sys.executable, "-m", "sluice", "topology", "from-slurm", "--out",
                        str(out), "--host-link-gbps", "10", "--uplink-gbps", "5"],
                       env=cli_env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "switch datapath ids numbered 1.." in r.stderr, r.stderr   # no --switch-dpids
    data = yaml.safe_load(out.read_text())
    mine = {h["name"]: (h["ip"], h["gpus"], h["rack"]) for h in data["hosts"]}
    topo = env.topology
    assert mine == {h.name: (h.ip, h.gpus, topo.rack_by_name[h.rack].tor) for h in topo.hosts}
    r = subprocess.run([sys.executable, "-m", "sluice", "validate", "--slurm", str(out)],
                       env=cli_env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "ok against Slurm" in r.stdout, r.stderr
    data["hosts"].append({"name": "h9", "rack": data["hosts"][0]["rack"], "gpus": 4,
                          "bw": 10000, "ip": "10.0.0.99"})
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    r = subprocess.run([sys.executable, "-m", "sluice", "validate", "--slurm", str(bad)],
                       env=cli_env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not known to Slurm: h9" in r.stderr, r.stderr


def test_scheduler_refuses_to_start_without_slurm(slurm_fabric, tmp_path):
    conf = Path(slurm_fabric.cluster.env["SLURM_CONF"]).read_text()
    dead = tmp_path / "slurm.conf"
    dead.write_text(re.sub(r"^SlurmctldPort=\d+", "SlurmctldPort=9", conf, flags=re.M))
    r = subprocess.run([sys.executable, "-m", "sluice", "scheduler", "--executor", "slurm",
                        "--topology", SLURM_TOPOLOGY, "--db", str(tmp_path / "db"),
                        "--listen", "127.0.0.1:0"],
                       env={**os.environ, "SLURM_CONF": str(dead)}, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Slurm is not usable" in r.stderr and "scontrol ping" in r.stderr, r.stderr


def test_an_sbatch_rejection_fails_the_job_with_slurms_message(slurm_fabric, tmp_path):
    sched = Scheduler(slurm_fabric, tmp_path)
    sched.args += ["--slurm-partition", "no-such-partition"]
    sched.start()
    try:
        sched.submit([tiny("rej", 2), tiny("rej2", 2)])
        jobs = sched.wait(["rej", "rej2"], states=("failed",), timeout=60)
        for job in jobs.values():
            assert "Invalid partition name specified" in job["reason"], job["reason"]
            assert job["external_id"] is None
        assert sched.proc.poll() is None            # the service goes on
    finally:
        sched.stop()


# ---- faults ----------------------------------------------------------------------------

def test_kill9_of_the_scheduler_loses_nothing_and_starts_nothing_twice(slurm_fabric,
                                                                         sched_factory):
    env = slurm_fabric
    sched = sched_factory(batches=25)
    names = ["k1", "k2", "k3", "k4", "k5"]
    sched.submit([tiny(n, 3) for n in names])
    sched.wait(names[:1], states=("running",), timeout=60)
    sched.kill9()
    time.sleep(1.0)
    sched.start()                 # same store: reconciles by Slurm job id / name
    jobs = sched.wait(names, timeout=240)
    for name, job in jobs.items():
        assert job["attempts"] == 1, (name, job)
        started = json.loads((run_dir(sched, job) / "batch.started").read_text())
        assert started["slurm_job_id"] == job["external_id"]
    # exactly one Slurm job per sluice job (every submission's name starts with the
    # store's tag and the job's run directory), each COMPLETED
    per_job = Counter()
    runs = sched.db.parent / (sched.db.name + ".slurm-runs")
    for job in jobs.values():
        for d in runs.glob(f"job-{job['id']}-attempt-*"):
            parts = slurm(env).jobs(name=f"sluice-{store_tag(sched.db)}-{d.name}")
            per_job[job["name"]] += len({p.leader for p in parts})
            assert all(p.state == "COMPLETED" for p in parts)
    assert per_job == Counter({n: 1 for n in names}), per_job


def test_kill9_of_slurmctld_then_restart_jobs_finish_and_views_agree(slurm_fabric,
                                                                     sched_factory):
    env = slurm_fabric
    sched = sched_factory(batches=40)
    names = ["c1", "c2"]
    sched.submit([tiny("c1", 3), tiny("c2", 6)])
    jobs = sched.wait(names, states=("running",), timeout=60,
                      ready=lambda j: j["external_id"] is not None)
    ids = [int(j["external_id"]) for j in jobs.values()]
    deadline = time.monotonic() + 60
    # running, and long enough for slurmctld to have saved them (measured: a job whose
    # slurmctld is killed 1-2 s after its start may be unknown after the restart; the
    # executor then re-queues it, see test_slurm_executor_units)
    while not (all(p.state == "RUNNING" for p in slurm(env).jobs(ids))
               and all(re.search(r"^batch 2 ", (run_dir(sched, j) / "ps" / "worker0.log")
                                 .read_text(errors="replace"), re.M)
                       for j in jobs.values() if (run_dir(sched, j) / "ps" / "worker0.log").exists())
               and all((run_dir(sched, j) / "ps" / "worker0.log").exists() for j in jobs.values())):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(2.0)
    env.cluster.kill_slurmctld()
    time.sleep(3.0)
    assert all(j["state"] == "running" for j in sched.jobs().values())   # no false verdict
    env.cluster.start_slurmctld()
    jobs = sched.wait(names, timeout=180)
    squeue = {}
    for p in slurm(env).jobs([int(j["external_id"]) for j in jobs.values()]):
        squeue.setdefault(p.leader, set()).add(p.state)
    for job in jobs.values():
        assert job["attempts"] == 1
        assert squeue[int(job["external_id"])] == {"COMPLETED"}, (job["name"], squeue)
        events = [e["kind"] for e in sched.job(job["id"])["events"]]
        assert events.count("started") == 1, events      # nothing re-run, nothing lost
        assert json.loads((run_dir(sched, job) / "result.json").read_text())["batches"]


def test_a_slurmd_killed_under_a_job_fails_it_with_the_reason_and_the_retry_avoids_it(
        slurm_fabric, sched_factory):
    env = slurm_fabric
    sched = sched_factory(batches=400, compute_s=0.1, max_retries=1)
    ids = sched.submit([tiny("d1", 6)])
    jobs = sched.wait(["d1"], states=("running",), timeout=60,
                      ready=lambda j: j["external_id"] is not None)
    first = jobs["d1"]
    victim = sorted(set(first["placement"]["worker_hosts"]) - set(first["placement"]["ps_hosts"]))[0]
    time.sleep(3.0)
    env.cluster.kill_slurmd(victim)
    try:
        deadline = time.monotonic() + 90
        while True:
            job = sched.job(ids["d1"])
            retries = [e for e in job["events"] if e["kind"] == "retry"]
            if retries:
                break
            assert time.monotonic() < deadline, job
            time.sleep(0.5)
        assert "NODE_FAIL" in retries[0]["detail"] or "DOWN" in retries[0]["detail"], retries
        assert f"Slurm job {first['external_id']}" in retries[0]["detail"]
        # the retry waits for the GPUs the first attempt's surviving components free
        # (Slurm's COMPLETING), which takes longer on a loaded machine
        deadline = time.monotonic() + 90
        while not (sched.job(ids["d1"])["state"] == "running"
                   and sched.job(ids["d1"])["external_id"] is not None):
            assert time.monotonic() < deadline, (sched.job(ids["d1"]), sched.log()[-3000:])
            time.sleep(0.3)
        second = sched.job(ids["d1"])
        assert second["attempts"] == 2
        assert victim not in second["placement"]["gpus_by_host"], (victim, second["placement"])
        assert int(second["external_id"]) != int(first["external_id"])
        subprocess.run(["scancel", second["external_id"]],
                       env={**os.environ, **env.cluster.env})
    finally:
        env.cluster.start_slurmd(victim)
        env.cluster.wait_idle([victim], 60)     # ReturnToService=2: back once it registers
