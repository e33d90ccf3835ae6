"""Site policy and the smaller points of running under Slurm, without Slurm: the scheduler's
``--slurm-*`` options and a job's ``slurm:`` block reaching sbatch's argv, typed GPUs
counted apart, data-fabric addresses apart from NodeAddr, PS port blocks reserved per
host per job below the ephemeral range, and one job's Slurm error kept to that job
(the slot's other decisions go on). tests/fabric/slurm/test_slurm_site_cluster.py drives a
real Slurm."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from job_scheduler.core.estimator import Estimator
from job_scheduler.core.cluster_state import ClusterState
from job_scheduler.service.app import ServiceConfig
from job_scheduler.service.policy_step import make_policy_step
from job_scheduler.service.scheduler import SchedulerService
from job_scheduler.service.slurm_addresses import load_fabric_addresses, parse_fabric_addresses
from job_scheduler.service.slurm_executor import SlurmExecutor, SlurmJobOptions
from job_scheduler.service.slurm_topology import check_topology
from job_scheduler.service.slurm_capacity import apply_capacity
from job_scheduler.service.store import JobStore
from ps_runtime.plan import BLOCK, EPHEMERAL_LOW, PORT_LOW, default_base_port, reserve_base_port
from slurm_client import JobInfo, NodeInfo, SiteOptions, SlurmCommandError
from slurm_client.parse import Component, Submission, sbatch_argv
from sluice_common.errors import InputError
from sluice_common.jobspec import parse_jobs_text
from topologies import load_topology

TOPO = load_topology("two-rack")       # h1 h2 | h3 h4, 4 GPUs each, 10.0.0.1-4


def component_words(argv: list[str]) -> list[list[str]]:
    return [part.split() for part in " ".join(argv[4:-1]).split(" : ")]


# ---- site options -----------------------------------------------------------------------

def test_site_flags_go_to_every_component_and_per_gpu_flags_to_gpu_parts():
    site = SiteOptions(account="physics", qos="high", time="1:00:00", partition="gpu",
                       constraint="a100&ib", gpu_type="a100", cpus_per_gpu=4, mem_per_gpu="16G",
                       sbatch_flags=("--reservation=maint",))
    sub = Submission("n", (Component("h1", 0), Component("h2", 2)), "/r/job.sh", "/r/o",
                     site=site)
    ps, workers = component_words(sbatch_argv(sub))
    for words in (ps, workers):
        for flag in ("--account=physics", "--qos=high", "--time=1:00:00", "--partition=gpu",
                     "--constraint=a100&ib", "--reservation=maint", "--no-requeue"):
            assert flag in words
    assert not any(w.startswith(("--gres", "--cpus-per-gpu", "--mem-per-gpu")) for w in ps)
    assert {"--gres=gpu:a100:2", "--cpus-per-gpu=4", "--mem-per-gpu=16G"} <= set(workers)


def test_a_jobs_slurm_block_overrides_field_by_field():
    site = SiteOptions(account="physics", time="30", gpu_type="a100")
    job = site.overridden({"account": "chem", "qos": "low"})
    assert (job.account, job.qos, job.time, job.gpu_type) == ("chem", "low", "30", "a100")
    with pytest.raises(ValueError, match="unknown field"):
        site.overridden({"sbatch_flags": ("--uid=0",)})     # the pass-through is the site's


@pytest.mark.parametrize("values, words", [
    ({"time": "soon"}, "time"), ({"account": "a b"}, "account"), ({"mem_per_gpu": "lots"}, "mem"),
    ({"cpus_per_gpu": 0}, "cpus_per_gpu"), ({"sbatch_flags": ("--nodelist=h9",)}, "--nodelist"),
    ({"sbatch_flags": ("--uid=0",)}, "--uid"), ({"sbatch_flags": ("reservation",)}, "one sbatch flag"),
    ({"sbatch_flags": ("--mail-user x",)}, "one sbatch flag"), ({"constraint": "a;b"}, "constraint")])
def test_bad_site_values_are_refused_naming_the_field(values, words):
    with pytest.raises(ValueError, match=words):
        SiteOptions(**values)


@pytest.mark.parametrize("ok", ["30", "1:00:00", "2-00:00:00", "2-12", "UNLIMITED", "90:30"])
def test_slurm_time_formats(ok):
    assert SiteOptions(time=ok).time == ok


def test_service_config_names_the_flag(tmp_path):
    with pytest.raises(ValueError, match="^slurm_time: "):
        ServiceConfig(db=tmp_path / "db", executor="slurm", slurm_time="soon")
    with pytest.raises(ValueError, match="^slurm_sbatch_flag: "):
        ServiceConfig(db=tmp_path / "db", executor="slurm", slurm_sbatch_flag=("--job-name=x",))
    config = ServiceConfig(db=tmp_path / "db", executor="slurm", slurm_account="physics",
                           slurm_partition="gpu", slurm_sbatch_flag=("--reservation=r",))
    assert config.slurm_site() == SiteOptions(account="physics", partition="gpu",
                                              sbatch_flags=("--reservation=r",))


def test_scheduler_help_and_exit_2_for_a_bad_option(tmp_path):
    run = [sys.executable, "-m", "sluice", "scheduler"]
    shown = subprocess.run(run + ["--help"], capture_output=True, text=True, timeout=60).stdout
    for flag in ("--slurm-account", "--slurm-qos", "--slurm-time", "--slurm-constraint",
                 "--slurm-gpu-type", "--slurm-cpus-per-gpu", "--slurm-mem-per-gpu",
                 "--slurm-sbatch-flag", "--slurm-fabric-addresses"):
        assert flag in shown
    r = subprocess.run(run + ["--executor", "slurm", "--db", str(tmp_path / "db"),
                              "--slurm-sbatch-flag=--nodelist=h9"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--slurm-sbatch-flag" in r.stderr and "--nodelist" in r.stderr


def test_job_file_slurm_block_is_validated_and_kept():
    base = ("jobs:\n  - {name: a, model: resnet18, batch_size: 8, dataset_size: 64, epochs: 1, "
            "max_gpus: 2, slurm: %s}\n")
    spec = parse_jobs_text(base % "{account: chem, time: '2:00:00', gpu_type: a100}", "f.yaml")[0]
    assert dict(spec.slurm) == {"account": "chem", "time": "2:00:00", "gpu_type": "a100"}
    for bad, field in (("{acount: x}", "slurm.acount"), ("{time: soon}", "slurm.time"),
                       ("{cpus_per_gpu: '4'}", "slurm.cpus_per_gpu")):
        with pytest.raises(InputError, match=f"job 'a'.*{field}"):
            parse_jobs_text(base % bad, "f.yaml")


# ---- typed GPUs, fabric addresses -------------------------------------------------------

def node(name, gres, used, addr=None):
    from slurm_client.nodes import gres_fields
    return NodeInfo(name, addr or f"10.0.0.{name[1:]}", name, "IDLE", **gres_fields(gres, used))


def test_capacity_counts_the_configured_gpu_type_only():
    nodes = {"h1": node("h1", "gpu:a100:4,gpu:1g.5gb:7", "gpu:a100:1,gpu:1g.5gb:7"),
             "h2": node("h2", "gpu:v100:4", "gpu:v100:0"),
             "h3": node("h3", "gpu:4", "gpu:0"), "h4": node("h4", "gpu:1g.5gb:7", "gpu:1g.5gb:0")}
    typed = ClusterState(TOPO)
    apply_capacity(typed, nodes, {}, gpu_type="a100")
    assert dict(zip(typed.names, typed.free)) == {"h1": 3, "h2": 0, "h3": 0, "h4": 0}
    whole = ClusterState(TOPO)
    apply_capacity(whole, nodes, {})
    # any whole GPU: the busy MIG slices of h1 take nothing, h4's slices give nothing
    assert dict(zip(whole.names, whole.free)) == {"h1": 3, "h2": 4, "h3": 4, "h4": 0}


def test_fabric_addresses_apart_from_nodeaddr(tmp_path):
    nodes = [node(f"h{k}", "gpu:4", "gpu:0", addr=f"192.168.0.{k}") for k in range(1, 5)]
    problems = check_topology(TOPO, nodes)
    assert len(problems) == 4 and "--slurm-fabric-addresses" in problems[0]
    fabric = {f"h{k}": f"10.0.0.{k}" for k in range(1, 5)}
    assert check_topology(TOPO, nodes, fabric) == []
    assert "data-fabric address is 10.0.0.9" in check_topology(TOPO, nodes, {**fabric, "h1": "10.0.0.9"})[0]
    path = tmp_path / "fabric.yaml"
    path.write_text("h1: 10.0.0.1\nh2: 10.0.0.2\n")
    assert load_fabric_addresses(path) == {"h1": "10.0.0.1", "h2": "10.0.0.2"}
    with pytest.raises(InputError, match="h2.*not an IP address"):
        parse_fabric_addresses({"h1": "10.0.0.1", "h2": "ib0"}, "f.yaml")
    with pytest.raises(InputError, match="also h1's"):
        parse_fabric_addresses({"h1": "10.0.0.1", "h2": "10.0.0.1"}, "f.yaml")
    with pytest.raises(InputError, match="cannot read"):
        load_fabric_addresses(tmp_path / "missing.yaml")


# ---- ports -----------------------------------------------------------------------------

def test_port_blocks_lie_below_the_ephemeral_range():
    for name in ("a", "resnet-a", "x" * 50, "job-123"):
        base = default_base_port(name)
        assert PORT_LOW <= base and base + BLOCK <= EPHEMERAL_LOW


def test_reserved_blocks_differ_per_host_whatever_the_names():
    taken = {"h1": [default_base_port("same")]}
    again = reserve_base_port(["h1", "h2"], taken, default_base_port("same"))
    assert again != default_base_port("same") and again + BLOCK <= EPHEMERAL_LOW
    # on a host it does not share, the job may take the same block
    assert reserve_base_port(["h3"], taken, default_base_port("same")) == default_base_port("same")
    full = {"h1": list(range(PORT_LOW, EPHEMERAL_LOW - BLOCK + 1, BLOCK))}
    with pytest.raises(ValueError, match="no free PS port block"):
        reserve_base_port(["h1"], full)


# ---- the executor and the service with a scripted Slurm ---------------------------------

class ScriptedSlurm:
    """A Slurm client that submits, reports every job RUNNING, and fails squeue for the
    Slurm ids in ``failing`` (an answer, not "unreachable")."""

    def __init__(self):
        self.submitted: list[Submission] = []
        self.failing: set[int] = set()
        self.cancelled: list[int] = []

    def submit(self, sub, env=None, unset=()):
        self.submitted.append(sub)
        return 100 + len(self.submitted)

    def jobs(self, ids=(), name=None):
        ids = set(ids)
        if ids & self.failing:
            raise SlurmCommandError("squeue --jobs=" + ",".join(map(str, ids)),
                                    "slurm_load_jobs error: Unexpected message received")
        return [JobInfo(i, "RUNNING", het_job_id=i, het_offset=0) for i in ids]

    def job(self, job_id):
        return []

    def cancel(self, job_id, signal=None):
        self.cancelled.append(job_id)

    def nodes(self):
        return [node(h.name, "gpu:4", "gpu:0", addr=h.ip) for h in TOPO.hosts]

    def job_gpu_indices(self):
        return {}          # no GRES detail: the GPU counts of apply_capacity hold


def jobs_yaml(*jobs: str) -> str:
    return "jobs:\n" + "".join(
        f"  - {{name: {j}, model: resnet18, batch_size: 8, dataset_size: 64, epochs: 1, "
        f"max_gpus: 2{extra}}}\n" for j, extra in (
            (j.split("|")[0], (", " + j.split("|")[1]) if "|" in j else "") for j in jobs))


def make(tmp_path, clock):
    fake = ScriptedSlurm()
    options = SlurmJobOptions(batches=3, site=SiteOptions(account="physics", time="30"))
    ex = SlurmExecutor(fake, TOPO, tmp_path / "runs", options, tag="t", error_grace=60)
    svc = SchedulerService(JobStore(tmp_path / "jobs.db"), TOPO,
                           make_policy_step("fifo", TOPO, Estimator()), {"slurm": ex}, "slurm",
                           clock=clock, capacity=ex.capacity)
    return svc, ex, fake


def test_job_overrides_reach_sbatch_and_ports_are_reserved(tmp_path):
    now = [1000.0]
    svc, ex, fake = make(tmp_path, lambda: now[0])
    svc.submit(jobs_yaml("a|slurm: {account: chem, qos: low}", "a2"), "t.yaml")
    svc.tick()
    by_name = {s.name.rsplit("-attempt", 1)[0]: s for s in fake.submitted}
    first, second = (component_words(sbatch_argv(s)) for s in fake.submitted)
    assert "--account=chem" in first[0] and "--qos=low" in first[0] and "--time=30" in first[0]
    assert "--account=physics" in second[0] and not any("--qos" in w for w in second[0])
    assert len(by_name) == 2
    plans = [json.loads(Path(j.run_dir, "plan.json").read_text()) for j in svc.store.jobs()]
    assert all(PORT_LOW <= p["base_port"] <= EPHEMERAL_LOW - BLOCK for p in plans)


def test_port_book_one_block_per_job_per_host(tmp_path):
    from job_scheduler.service.slurm_ports import PortBook
    from job_scheduler.service.store import JobRecord

    spec = parse_jobs_text(jobs_yaml("same"), "t.yaml")[0]
    book = PortBook()
    a = book.reserve(1, "same", {"h1", "h2"})
    b = book.reserve(2, "same", {"h2"})           # same name, a shared host
    assert a == default_base_port("same") and b != a
    # a restarted service learns job 1's block from its plan.json, and forgets ended jobs
    run = tmp_path / "job-1"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps({"base_port": a, "decided_hosts": ["h1", "h2"]}))
    fresh = PortBook()
    fresh.sync([JobRecord(1, 1, "same", spec, "running", 0.0, executor="slurm",
                          run_dir=str(run))])
    assert fresh.taken() == {"h1": [a], "h2": [a]}
    assert fresh.reserve(3, "same", {"h1"}) != a
    fresh.sync([])
    assert fresh.taken() == {}


def test_one_jobs_slurm_error_stays_that_jobs(tmp_path):
    now = [1000.0]
    svc, ex, fake = make(tmp_path, lambda: now[0])
    svc.submit(jobs_yaml("a", "b"), "t.yaml")
    svc.tick()
    ids = {j.name: j for j in svc.store.jobs()}
    fake.failing = {int(ids["a"].external_id)}
    now[0] += 1
    svc.submit(jobs_yaml("c"), "t.yaml")
    assert svc.tick() == {"ended": 0, "started": 1}     # c still decided and started
    states = {j.name: j.state for j in svc.store.jobs()}
    assert states == {"a": "running", "b": "running", "c": "running"}
    now[0] += 61                                         # past error_grace: a alone fails
    svc.tick()
    jobs = {j.name: j for j in svc.store.jobs()}
    assert jobs["a"].state == "failed" and "Unexpected message received" in jobs["a"].reason
    assert jobs["b"].state == jobs["c"].state == "running"
    assert fake.cancelled == [int(ids["a"].external_id)]


def test_unreadable_node_list_means_no_capacity_not_a_crash(tmp_path):
    now = [1000.0]
    svc, ex, fake = make(tmp_path, lambda: now[0])

    def broken():
        raise SlurmCommandError("sinfo --json --Node", "sinfo: error: slurm_load_partitions")
    fake.nodes = broken
    svc.submit(jobs_yaml("a"), "t.yaml")
    assert svc.tick() == {"ended": 0, "started": 0}
    assert {j.name: j.state for j in svc.store.jobs()} == {"a": "queued"}


def test_topology_from_slurm_takes_the_data_fabric_addresses():
    from job_scheduler.service.slurm_topology import topology_from_slurm

    nodes = [node(f"g{k}", "gpu:a100:8,gpu:1g.5gb:7", "gpu:a100:0", addr=f"192.168.0.{k}")
             for k in (1, 2)]
    data = topology_from_slurm(nodes, [], host_link_gbps=100, uplink_gbps=400,
                               fabric_addresses={"g1": "10.100.0.1", "g2": "10.100.0.2"})
    assert [(h["ip"], h["gpus"]) for h in data["hosts"]] == [("10.100.0.1", 8), ("10.100.0.2", 8)]
    plain = topology_from_slurm(nodes, [], host_link_gbps=100, uplink_gbps=400)
    assert [h["ip"] for h in plain["hosts"]] == ["192.168.0.1", "192.168.0.2"]


# ---- a job Slurm keeps pending ----------------------------------------------------------

class PendingSlurm(ScriptedSlurm):
    """Every job PENDING (Slurm's reason ``reason``) until ``running`` names it."""

    def __init__(self):
        super().__init__()
        self.reason = "PartitionDown"
        self.running: set[int] = set()

    def jobs(self, ids=(), name=None):
        return [JobInfo(i, "RUNNING" if i in self.running else "PENDING",
                        reason="None" if i in self.running else self.reason,
                        het_job_id=i, het_offset=0) for i in set(ids)]


def test_a_job_pending_past_the_timeout_shows_why_and_goes_back_to_the_queue(tmp_path):
    now = [1000.0]
    fake = PendingSlurm()
    options = SlurmJobOptions(batches=3, pending_timeout=30)
    ex = SlurmExecutor(fake, TOPO, tmp_path / "runs", options, tag="t")
    svc = SchedulerService(JobStore(tmp_path / "jobs.db"), TOPO,
                           make_policy_step("fifo", TOPO, Estimator()), {"slurm": ex}, "slurm",
                           clock=lambda: now[0], capacity=ex.capacity)
    svc.submit(jobs_yaml("p", "r"), "t.yaml")
    svc.tick()
    ids = {j.name: int(j.external_id) for j in svc.store.jobs()}
    fake.running.add(ids["r"])
    now[0] += 1
    svc.tick()
    jobs = {j.name: j for j in svc.store.jobs()}
    assert jobs["p"].state == "running" and jobs["p"].reason == "pending in Slurm (PartitionDown)"
    assert jobs["r"].reason is None
    now[0] += 30                               # past the timeout: cancelled and re-queued
    svc.tick()
    p = {j.name: j for j in svc.store.jobs()}["p"]
    assert fake.cancelled == [ids["p"]]
    requeued = [d for _, kind, d in svc.store.events(p.id) if kind == "requeued"]
    assert requeued and requeued[0].startswith("pending in Slurm for 30 s (PartitionDown)")
    # back in the queue without counting an attempt, and decided again in the same slot
    assert (p.state, p.attempts, len(fake.submitted)) == ("running", 1, 3)
    assert p.external_id == "103" and p.reason is None
    now[0] += 1
    svc.tick()                                 # pending again: Slurm's reason shown again
    p = {j.name: j for j in svc.store.jobs()}["p"]
    assert p.reason == "pending in Slurm (PartitionDown)"
    fake.running.add(103)
    now[0] += 1
    svc.tick()
    p = {j.name: j for j in svc.store.jobs()}["p"]
    assert (p.state, p.external_id, p.reason) == ("running", "103", None)


def test_pending_timeout_zero_waits_for_ever(tmp_path):
    fake = PendingSlurm()
    ex = SlurmExecutor(fake, TOPO, tmp_path / "runs", SlurmJobOptions(pending_timeout=0))
    from job_scheduler.service.store import JobRecord
    spec = parse_jobs_text(jobs_yaml("p"), "t.yaml")[0]
    job = JobRecord(1, 1, "p", spec, "running", 0.0, executor="slurm", started_at=0.0,
                    run_dir=str(tmp_path / "r"), external_id="5", attempts=1)
    assert ex.poll(job, 10.0) is None and ex.poll(job, 1e6) is None
    assert ex.learned(job) == {"reason": "pending in Slurm (PartitionDown)"}
    assert fake.cancelled == []
