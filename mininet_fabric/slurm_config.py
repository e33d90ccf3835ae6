"""The configuration text of the local Slurm cluster (``mininet_fabric.slurm_cluster``):
``slurm.conf``, ``gres.conf`` and ``topology.conf`` as pure functions of the cluster's
nodes, GPUs and topology."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from topologies import Topology

PARTITION = "gpu"
CRED_EXPIRE_S = 15               # the requeue delay (Slurm's default 120 s)
CPUS_PER_NODE = 32               # config_overrides: Slurm's CPU count, not the machine's


def gpu_range(gpus: int) -> str:
    return "nvidia0" if gpus == 1 else f"nvidia[0-{gpus - 1}]"


def slurm_conf(*, control_host: str, control_addr: str, ctld_port: int, slurmd_port: int,
               workdir: Path, munge_socket: Path, nodes: list[tuple[str, str, int]]) -> str:
    """slurm.conf for ``nodes`` = [(name, address, gpus)]."""
    w = workdir
    lines = [
        "# Written by sluice (mininet_fabric/slurm_cluster.py): a local test cluster.",
        "ClusterName=sluice",
        f"SlurmctldHost={control_host}({control_addr})",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # cred_expire: a job step credential's lifetime, and how long a requeued job waits
        # before it may start again (default 120 s: a node-failure test would wait 121 s).
        f"AuthInfo=socket={munge_socket},cred_expire={CRED_EXPIRE_S}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={w}/state",
        f"SlurmdSpoolDir={w}/spool/%n",
        f"SlurmctldPidFile={w}/run/slurmctld.pid",
        f"SlurmdPidFile={w}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={w}/log/slurmctld.log",
        f"SlurmdLogFile={w}/log/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        # Heterogeneous jobs are started by the backfill scheduler only: run it every second.
        "SchedulerParameters=bf_interval=1",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        # The CPU and GPU counts below stand, whatever this small machine really has.
        "SlurmdParameters=config_overrides",
        "GresTypes=gpu",
        "TopologyPlugin=topology/tree",
        # No slurmdbd: no accounting (sacct has nothing); completion records in a text file.
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={w}/log/jobcomp.txt",
        # Test-sized timers: a dead slurmd marks its node DOWN within ~20 s, a job's
        # processes get 5 s between SIGTERM and SIGKILL, finished jobs stay visible to
        # `scontrol show job` for 5 minutes.
        "SlurmdTimeout=15",
        "MessageTimeout=10",
        "KillWait=5",
        "MinJobAge=300",
        "InactiveLimit=0",
        "BatchStartTimeout=10",
        "JobRequeue=1",
    ]
    for name, addr, gpus in nodes:
        gres = f" Gres=gpu:{gpus}" if gpus else ""
        lines.append(f"NodeName={name} NodeHostname={name} NodeAddr={addr} "
                     f"CPUs={CPUS_PER_NODE} RealMemory=1000{gres} State=UNKNOWN")
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def gres_conf(dev_dir: Path, gpus: dict[str, int]) -> str:
    lines = ["# GPUs as GRES on fake device files (mknod c 195 K), one directory per node."]
    for name, k in gpus.items():
        if k:
            lines.append(f"NodeName={name} Name=gpu File={dev_dir}/{name}/{gpu_range(k)}")
    return "\n".join(lines) + "\n"


def topology_conf(topology: "Topology", hosts: list[str]) -> str:
    """Leaf switch = a rack's ToR with the rack's nodes; one top switch above them."""
    lines = ["# Leaf switches are the racks' ToRs (sluice topology from-slurm reads them as racks)."]
    leaves = []
    for rack in topology.racks:
        nodes = [h.name for h in topology.hosts_by_rack[rack.name] if h.name in hosts]
        if nodes:
            lines.append(f"SwitchName={rack.tor} Nodes={','.join(nodes)}")
            leaves.append(rack.tor)
    if len(leaves) > 1:
        spines = [s.name for s in topology.switches if s.role == "spine"]
        top = spines[0] if len(spines) == 1 else "fabric"
        lines.append(f"SwitchName={top} Switches={','.join(leaves)}")
    return "\n".join(lines) + "\n"
