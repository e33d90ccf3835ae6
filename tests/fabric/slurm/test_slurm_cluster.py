"""The local Slurm cluster on the Mininet fabric (mininet_fabric/slurm_cluster.py) under
the sluice controller: every node idle with its GPUs, jobs run inside the host Slurm
names, heterogeneous jobs start, drain/resume, and nothing is left after stop().

Real Slurm 22.05 (Debian's slurmctld/slurmd/munge, `make slurm`), real OVS and Mininet.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from mininet_fabric.slurm_cluster import HEAD_INTF
from mininet_fabric.slurm_config import gpu_range, gres_conf, slurm_conf, topology_conf
from topologies import load_topology

pytestmark = pytest.mark.fabric
SLURM_TOPOLOGY = "two-rack"


def slurm(env, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **env.cluster.env})
    assert r.returncode == 0, f"{' '.join(args)} -> {r.returncode}: {r.stderr}"
    return r


# ---- configuration text (no daemons) ------------------------------------------------------

@pytest.mark.parametrize("gpus,expected", [(1, "nvidia0"), (4, "nvidia[0-3]")])
def test_gpu_range(gpus, expected):
    assert gpu_range(gpus) == expected


def test_config_names_every_node_with_its_address_gpus_and_rack():
    topo = load_topology("two-rack")
    hosts = [h.name for h in topo.hosts]
    conf = slurm_conf(control_host="ctl", control_addr="10.0.0.254", ctld_port=1, slurmd_port=2,
                      workdir=Path("/w"), munge_socket=Path("/w/m.sock"),
                      nodes=[(h.name, h.ip, h.gpus if h.name != "h4" else 0) for h in topo.hosts])
    assert "SlurmctldHost=ctl(10.0.0.254)" in conf
    assert "NodeName=h3 NodeHostname=h3 NodeAddr=10.0.0.3 CPUs=32 RealMemory=1000 Gres=gpu:4" in conf
    assert "NodeName=h4 NodeHostname=h4 NodeAddr=10.0.0.4 CPUs=32 RealMemory=1000 State" in conf
    for line in ("AuthInfo=socket=/w/m.sock,cred_expire=15", "SchedulerParameters=bf_interval=1",
                 "SlurmdParameters=config_overrides", "JobCompType=jobcomp/filetxt"):
        assert line in conf.splitlines()
    assert "slurmdbd" not in conf.lower()
    assert gres_conf(Path("/d"), {"h1": 2, "h2": 0}).splitlines()[1:] == [
        "NodeName=h1 Name=gpu File=/d/h1/nvidia[0-1]"]
    assert topology_conf(topo, hosts).splitlines()[1:] == [
        "SwitchName=tor1 Nodes=h1,h2", "SwitchName=tor2 Nodes=h3,h4",
        "SwitchName=spine1 Switches=tor1,tor2"]


# ---- the running cluster --------------------------------------------------------------------

def test_every_node_is_idle_with_its_gpus(slurm_fabric):
    env = slurm_fabric
    assert env.cluster.hosts == ["h1", "h2", "h3", "h4"]
    assert env.cluster.bringup_s < 30
    out = slurm(env, "sinfo", "-h", "-N", "-o", "%N %T %G").stdout.split("\n")
    rows = {l.split()[0]: l.split()[1:] for l in out if l.strip()}
    assert rows == {h.name: ["idle", f"gpu:{h.gpus}"] for h in env.topology.hosts}
    addr = slurm(env, "scontrol", "show", "node", "h3", "-o").stdout
    assert "NodeAddr=10.0.0.3 " in addr and "NodeHostName=h3 " in addr
    switches = slurm(env, "scontrol", "show", "topology").stdout
    assert "SwitchName=tor2 Level=0 LinkSpeed=1 Nodes=h3,h4" in switches.splitlines()


def test_srun_runs_inside_the_named_host_across_the_fabric(slurm_fabric):
    env = slurm_fabric
    for host in ("h1", "h4"):
        out = slurm(env, "srun", "-w", host, "--gres=gpu:2", "sh", "-c",
                    "hostname; ip -4 -o addr show; echo gpus=$CUDA_VISIBLE_DEVICES").stdout
        lines = out.splitlines()
        assert lines[0] == host
        assert f"inet {env.ip(host)}/8" in out
        assert "gpus=0,1" in out
    # slurmctld talks to the slurmds through the switches: the head node's port carried it
    stats = json.loads(subprocess.run(["ip", "-j", "-s", "link", "show", HEAD_INTF],
                                      capture_output=True, text=True).stdout)[0]["stats64"]
    assert stats["rx"]["packets"] > 20 and stats["tx"]["packets"] > 20


def test_sbatch_on_a_named_node(slurm_fabric, tmp_path):
    env = slurm_fabric
    out = tmp_path / "out.txt"
    job = slurm(env, "sbatch", "--parsable", "-w", "h2", "--gres=gpu:1", "-o", str(out),
                "--wrap", "hostname; ip -4 -o addr show").stdout.strip()
    deadline = time.monotonic() + 30
    while "JobState=COMPLETED" not in (show := slurm(env, "scontrol", "show", "job", job, "-o").stdout):
        assert time.monotonic() < deadline, show
        assert "JobState=FAILED" not in show, show
        time.sleep(0.3)
    text = out.read_text()
    assert text.splitlines()[0] == "h2" and f"inet {env.ip('h2')}/8" in text


def test_heterogeneous_job_across_two_racks_starts(slurm_fabric):
    env = slurm_fabric
    t0 = time.monotonic()
    out = slurm(env, "srun", "-w", "h1", "--gres=gpu:1", "hostname", ":",
                "-w", "h3", "--gres=gpu:3", "sh", "-c", "hostname; echo $CUDA_VISIBLE_DEVICES").stdout
    assert sorted(out.split()) == ["0,1,2", "h1", "h3"]
    assert time.monotonic() - t0 < 20


def test_drain_and_resume(slurm_fabric):
    env = slurm_fabric
    env.cluster.drain("h2", "maintenance by test")
    try:
        assert env.cluster.node_states()["h2"] == "drained"
        assert "Reason=maintenance by test" in slurm(env, "scontrol", "show", "node", "h2", "-o").stdout
        r = subprocess.run(["sbatch", "--parsable", "-w", "h2", "-o", "/dev/null", "--wrap", "true"],
                           capture_output=True, text=True, env={**os.environ, **env.cluster.env})
        job = r.stdout.strip()
        time.sleep(2)   # two backfill passes: a drained node starts nothing
        assert "JobState=PENDING" in slurm(env, "scontrol", "show", "job", job, "-o").stdout
    finally:
        env.cluster.resume("h2")
    deadline = time.monotonic() + 20
    while "JobState=COMPLETED" not in slurm(env, "scontrol", "show", "job", job, "-o").stdout:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    env.cluster.wait_idle(["h2"], 20)


def _job_state(env, job: str) -> str:
    show = slurm(env, "scontrol", "show", "job", job, "-o").stdout
    return show.split("JobState=", 1)[1].split()[0]


def _wait_state(env, job: str, state: str, timeout: float) -> float:
    t0 = time.monotonic()
    while _job_state(env, job) != state:
        assert time.monotonic() - t0 < timeout, f"job {job} not {state} after {timeout} s"
        time.sleep(0.25)
    return time.monotonic() - t0


def test_requeued_job_starts_again_within_the_short_requeue_delay(slurm_fabric):
    env = slurm_fabric
    job = slurm(env, "sbatch", "--parsable", "--requeue", "-w", "h3", "--gres=gpu:1",
                "-o", "/dev/null", "--wrap", "sleep 120").stdout.strip()
    try:
        _wait_state(env, job, "RUNNING", 20)
        slurm(env, "scontrol", "requeue", job)
        again = _wait_state(env, job, "RUNNING", 60)
        assert "Restarts=1" in slurm(env, "scontrol", "show", "job", job, "-o").stdout
        print(f"requeued job running again after {again:.1f} s")
        assert again < 40          # Slurm's default cred_expire would make it ~121 s
    finally:
        slurm(env, "scancel", job)
    _wait_state(env, job, "CANCELLED", 30)


def test_slurmd_and_slurmctld_restart(slurm_fabric):
    env = slurm_fabric
    env.cluster.kill_slurmctld()
    r = subprocess.run(["sinfo"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **env.cluster.env})
    assert r.returncode != 0
    env.cluster.start_slurmctld()
    env.cluster.kill_slurmd("h4")
    env.cluster.start_slurmd("h4")
    # the restarted node registers again before it is given work (an operator waits too)
    env.cluster.wait_idle(["h4"], 30)
    assert slurm(env, "srun", "-w", "h4", "hostname").stdout.strip() == "h4"
    env.cluster.wait_idle(env.cluster.hosts, 30)
