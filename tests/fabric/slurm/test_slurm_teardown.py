"""Bring-up and teardown of the local Slurm cluster with its controller and fabric: nothing
of it remains afterwards (its own module: the fabric is one per process, and
tests/fabric/slurm/test_slurm_cluster.py holds one for its whole module)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from mininet_fabric.slurm_cluster import HEAD_INTF

pytestmark = pytest.mark.fabric


def _processes() -> dict[int, str]:
    out = {}
    for p in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            out[int(p)] = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            pass
    return out


def _netns_in_use(born_before: float) -> set[str]:
    """The network namespaces of processes started before ``born_before`` (a
    ``time.monotonic()``, which counts from boot as /proc's start times do): nsfs reuses a
    freed namespace's inode, so a fabric another process brings up right after ours is
    gone (the fabric lock is free then) could otherwise look like ours left behind."""
    out = set()
    ticks = os.sysconf("SC_CLK_TCK")
    for p in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            started = int(stat.rsplit(")", 1)[1].split()[19]) / ticks
            if started < born_before:
                out.add(os.readlink(f"/proc/{p}/ns/net"))
        except (OSError, ValueError, IndexError):
            pass
    return out


# the job's command: a duration nobody else types, so that a ``sleep`` of someone else's on
# the machine is not taken for a job process left behind
JOB_CMD = "sleep 293.17"


def test_nothing_is_left_after_stop(tmp_path):
    """A whole environment of its own (controller, fabric, Slurm, one running job), then
    nothing of it remains: no daemon, no job process, no namespace, no head port, no state."""
    from end_to_end.slurm_env import slurm_environment

    with slurm_environment("single-rack", tmp_path, progress=False) as env:
        workdir = env.cluster.workdir
        subprocess.run(["sbatch", "-w", "h2", "-o", "/dev/null", "--wrap", JOB_CMD], check=True,
                       capture_output=True, env={**os.environ, **env.cluster.env})
        deadline = time.monotonic() + 20
        while JOB_CMD not in " ".join(_processes().values()):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        namespaces = {os.readlink(f"/proc/{env.fabric.host(h).pid}/ns/net") for h in env.cluster.hosts}
        ours = {pid: cmd for pid, cmd in _processes().items() if str(workdir) in cmd}
        assert len([c for c in ours.values() if c.startswith("slurmd ")]) == 4
        assert any(c.startswith("slurmctld ") for c in ours.values())
        assert any(c.startswith("munged ") for c in ours.values())
        t0 = time.monotonic()
    teardown_s = time.monotonic() - t0
    deadline = time.monotonic() + 10   # a killed orphan is reaped by init a moment later
    while True:
        left = {pid: cmd for pid, cmd in _processes().items()
                if pid in ours or str(workdir) in cmd or JOB_CMD in cmd}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert left == {}
    assert namespaces.isdisjoint(_netns_in_use(born_before=t0 + teardown_s))
    assert subprocess.run(["ip", "link", "show", HEAD_INTF], capture_output=True).returncode != 0
    assert not workdir.exists()
    print(f"teardown of controller + fabric + Slurm: {teardown_s:.1f} s")
