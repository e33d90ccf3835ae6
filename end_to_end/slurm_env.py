"""The fabric, the sluice controller and a local Slurm cluster on that fabric, together: what
``sluice demo --executor slurm`` and the tests' ``slurm_fabric`` fixture stand on.

    with slurm_environment("two-rack-100g", out) as env:
        env.cluster.env        # SLURM_CONF: any Slurm command works from this namespace
        env.controller_api     # http://198.18.0.1:PORT, admin token env.admin_token

Order (as ``sluice run`` does it, plus Slurm): the management network (the path from
every host to the controller's API off the data plane, mininet_fabric/management.py: a
job's workers report their progress themselves, from the nodes), the controller process
with its API there, given the topology
plus the Slurm head node (``mininet_fabric.slurm_cluster.with_head_node``: the root
namespace's port on the fabric, so the controller admits Slurm's control traffic); the
fabric connected to it (global fabric lock, priority tree); a ping round so the controller
locates every host; then munged, slurmctld and one slurmd per host. Everything is stopped
in reverse order on the way out, also after a failure.
"""

from __future__ import annotations

import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from topologies import Topology, load_topology


@dataclass
class SlurmFabric:
    fabric: Any                    # mininet_fabric.fabric.Fabric, up
    cluster: Any                   # mininet_fabric.slurm_cluster.SlurmCluster, started
    topology: Topology             # the cluster's topology (no head node): the scheduler's
    controller_api: str            # "http://198.18.0.1:PORT" (the management network)
    admin_token: str
    controller_ofp: str            # "127.0.0.1:PORT" (OpenFlow)
    timings: dict[str, float] = field(default_factory=dict)

    def ip(self, host: str) -> str:
        return self.topology.host_by_name[host].ip


def opened_for_users() -> tuple[Path, ...]:
    """What :func:`slurm_environment` makes the cluster's users able to enter while the
    cluster runs (with every directory above): the checkout and its Python."""
    from ps_runtime.runners import REPO_ROOT

    return Path(REPO_ROOT), Path(sys.executable).parent


@contextmanager
def slurm_environment(topology: Topology | str, out: Path, *, progress: bool = True,
                      stats_interval: float = 1.0, rank: str | None = None,
                      confine: bool = False) -> Iterator[SlurmFabric]:
    """``confine``: each step fenced to its GPUs by cgroups (mininet_fabric.slurm_confine)."""
    from end_to_end.controller_proc import controller_process
    from end_to_end.run import _wait_hosts_located
    from mininet_fabric.fabric import Fabric
    from mininet_fabric.management import ManagementNet
    from mininet_fabric.slurm_cluster import SlurmCluster, with_head_node, write_topology_yaml
    from mininet_fabric.traverse import traversable

    topo = topology if isinstance(topology, Topology) else load_topology(topology)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    controller_topo = write_topology_yaml(with_head_node(topo), out / "controller-topology.yaml")
    t0 = time.monotonic()
    if progress:
        print(f"sluice: starting the controller for {topo.name} (+ Slurm head node)",
              file=sys.stderr, flush=True)
    # the controller's API on the management network: the jobs' workers, in the nodes'
    # namespaces, report their progress to it themselves (mininet_fabric/management.py)
    with ManagementNet() as mgmt, \
            controller_process(str(controller_topo), out / "controller.log",
                               stats_interval=stats_interval, rank=rank,
                               api_host=mgmt.address) as (ofp, client), \
            Fabric(topo, controller=ofp, progress=progress, management=mgmt) as fabric:
        _wait_hosts_located(fabric, client)
        t_fabric = time.monotonic() - t0
        if confine:
            from mininet_fabric.slurm_confine import ConfinedSlurmCluster as SlurmCluster
        # Slurm's files under a directory every user can reach (their jobs' srun steps read
        # slurm.conf and talk to munged); ``out`` may sit in a private (0700) tree.
        workdir = Path(tempfile.mkdtemp(prefix="sluice-slurm-"))
        workdir.chmod(0o755)
        # the jobs of the cluster's users run this checkout's Python (mininet_fabric.traverse)
        with traversable(*opened_for_users()), \
                SlurmCluster(fabric, workdir, {h.name: h.gpus for h in topo.hosts},
                             progress=progress, keep_logs=out / "slurm-logs") as cluster:
            env = SlurmFabric(fabric, cluster, topo, client.url, client.admin_token, ofp,
                              {"fabric_and_controller_s": round(t_fabric, 2),
                               "slurm_bringup_s": round(cluster.bringup_s, 2)})
            yield env
