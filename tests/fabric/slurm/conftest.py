"""The fixtures the Slurm fabric tests share."""

from __future__ import annotations

import os
import subprocess

import pytest

from support.slurm_scheduler import Scheduler


@pytest.fixture
def sched_factory(slurm_fabric, tmp_path):
    made = []

    def make(**kw) -> Scheduler:
        s = Scheduler(slurm_fabric, tmp_path, **kw)
        made.append(s)
        return s.start()

    yield make
    for s in made:
        s.stop()
    # nothing may stay in Slurm for the next test: cancel every job, resume every node
    cli_env = {**os.environ, **slurm_fabric.cluster.env}
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env=cli_env, capture_output=True,
                         text=True).stdout.split()
    for jid in sorted({j.split("+")[0] for j in out}):
        subprocess.run(["scancel", jid], env=cli_env, capture_output=True)
    for h in slurm_fabric.cluster.hosts:
        subprocess.run(["scontrol", "update", f"nodename={h}", "state=resume"], env=cli_env,
                       capture_output=True)
