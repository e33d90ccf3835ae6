"""The local Slurm cluster with each step confined to its own GPUs (cgroup devices).

Slurm sets ``CUDA_VISIBLE_DEVICES`` (and ``SLURM_STEP_GPUS``) of a step from its GRES
whenever ``gres.conf`` names device files; a program may still open any other GPU's
device file unless ``TaskPlugin=task/cgroup`` with ``ConstrainDevices=yes`` fences the
step in a devices cgroup. Measured here (Debian 12 container, cgroup v1 controllers
mounted read-write, Slurm 22.05): it works; a ``--gres=gpu:1`` step opens its own
``/dev/nvidiaK`` (the fake device files answer ENXIO: no driver) and gets EPERM on every
other. :class:`ConfinedSlurmCluster` is :class:`~mininet_fabric.slurm_cluster.SlurmCluster`
with that configuration (``slurm_environment(..., confine=True)``);
tests/fabric/slurm/test_slurm_confine.py checks it. The default local cluster stays ``task/none``.
"""

from __future__ import annotations

import os
from pathlib import Path

from mininet_fabric.slurm_cluster import SlurmCluster

CGROUP_CONF = """# Written by sluice (mininet_fabric/slurm_confine.py): steps see only their GPUs.
CgroupPlugin=cgroup/v1
CgroupAutomount=no
ConstrainDevices=yes
ConstrainCores=no
ConstrainRAMSpace=no
"""
DEVICES_CGROUP = Path("/sys/fs/cgroup/devices")


def devices_cgroup_available() -> bool:
    """A cgroup v1 devices controller this process may write (what task/cgroup needs)."""
    return DEVICES_CGROUP.is_dir() and os.access(DEVICES_CGROUP, os.W_OK)


def confined_conf(slurm_conf: str) -> str:
    """slurm.conf with the cgroup task and process-tracking plugins."""
    out = []
    for line in slurm_conf.splitlines():
        if line.startswith("TaskPlugin="):
            line = "TaskPlugin=task/cgroup"
        elif line.startswith("ProctrackType="):
            line = "ProctrackType=proctrack/cgroup"
        out.append(line)
    return "\n".join(out) + "\n"


class ConfinedSlurmCluster(SlurmCluster):
    def _write_config(self) -> None:
        super()._write_config()
        conf = self.conf_dir / "slurm.conf"
        conf.write_text(confined_conf(conf.read_text()))
        (self.conf_dir / "cgroup.conf").write_text(CGROUP_CONF)
