"""cgroup confinement of Slurm steps to their GPUs works on this kernel (Slurm 22.05,
``TaskPlugin=task/cgroup``, ``ConstrainDevices=yes``, fake ``/dev/nvidiaK`` device files):
a worker-like step (``--gres=gpu:1``) is bound to the GPU Slurm gave it and can open only
that device; a PS-like step (``--gres=none``) sees and opens no GPU. Real daemons."""

from __future__ import annotations

import os
import subprocess

import pytest

from mininet_fabric.slurm_confine import confined_conf, devices_cgroup_available

pytestmark = pytest.mark.fabric


def test_the_confined_configuration_swaps_only_the_task_and_proctrack_plugins():
    text = "A=1\nTaskPlugin=task/none\nProctrackType=proctrack/linuxproc\nB=2\n"
    assert confined_conf(text) == ("A=1\nTaskPlugin=task/cgroup\n"
                                   "ProctrackType=proctrack/cgroup\nB=2\n")


def test_a_step_opens_only_the_gpu_slurm_gave_it(tmp_path):
    from end_to_end.slurm_env import slurm_environment

    assert devices_cgroup_available(), "no writable cgroup v1 devices controller here"
    with slurm_environment("two-rack", tmp_path / "w", confine=True, progress=False) as env:
        e = {**os.environ, **env.cluster.env}
        dev = env.cluster.workdir / "dev" / "h1"
        probe = ("echo CVD=$CUDA_VISIBLE_DEVICES SSG=$SLURM_STEP_GPUS; for k in 0 1 2 3; do "
                 f"if head -c1 {dev}/nvidia$k >/dev/null 2>/tmp/.probe$$; then echo $k:open; "
                 "else echo $k:$(sed 's/.*: //' /tmp/.probe$$); fi; done; rm -f /tmp/.probe$$")
        hold = subprocess.run(["sbatch", "--parsable", "-w", "h1", "--gres=gpu:1", "-o",
                               "/dev/null", "--wrap", "sleep 60"], env=e, capture_output=True,
                              text=True, check=True).stdout.strip()   # takes GPU 0
        try:
            worker = subprocess.run(["srun", "-w", "h1", "--gres=gpu:1", "sh", "-c", probe],
                                    env=e, capture_output=True, text=True, timeout=90).stdout
            ps = subprocess.run(["srun", "-w", "h1", "--gres=none", "sh", "-c", probe],
                                env=e, capture_output=True, text=True, timeout=90).stdout
        finally:
            subprocess.run(["scancel", hold], env=e, capture_output=True)
    lines = worker.splitlines()
    assert "SSG=1" in lines[0], worker              # the GPU the other job left
    assert lines[1:] == ["0:Operation not permitted", "1:No such device or address",
                         "2:Operation not permitted", "3:Operation not permitted"], worker
    assert ps.splitlines()[0] == "CVD= SSG=", ps
    assert all(line.endswith("Operation not permitted") for line in ps.splitlines()[1:]), ps
