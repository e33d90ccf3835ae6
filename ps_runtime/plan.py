"""Where a PS job's processes run and which fixed ports they listen on.

ps-lite picks a random listening port unless ``PORT`` is set; sluice always sets it, so
the endpoints it hands to the controller are exact before a single packet flows:

    scheduler  base
    server i   base + 1 + i
    worker j   base + 1 + num_servers + j

``base`` is either given (a launcher running many jobs hands out disjoint blocks:
:func:`reserve_base_port` finds a block free on every host of a job) or a stable
function of the job name. Every block lies below Linux's ephemeral range (32768-60999
by default, ``net.ipv4.ip_local_port_range``): a PS port inside it can be taken by any
outgoing connection of the host before the PS binds it. Everything here is pure.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Iterable, Mapping

PORT_LOW = 20000          # above the well-known and registered services
EPHEMERAL_LOW = 32768     # Linux's default ip_local_port_range is 32768-60999
BLOCK = 40                # ports reserved per job: scheduler + servers + workers
BLOCKS = (EPHEMERAL_LOW - PORT_LOW) // BLOCK     # 319 blocks in [PORT_LOW, 32768)
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Node:
    """One process's host: the name the runner knows it by, its IP, and (a worker's)
    the GPU index of that host it is bound to (None: no binding)."""
    host: str
    ip: str
    gpu: int | None = None


@dataclass(frozen=True)
class HostPlan:
    """The hosts (name and IP) that one job's PS and worker processes run on: a
    scheduler :class:`sluice_common.placement.Placement` resolved against a topology
    (``of``), or this machine's loopback. The ps-lite scheduler runs on servers[0]."""
    servers: tuple[Node, ...]
    workers: tuple[Node, ...]

    def __post_init__(self):
        if not self.servers or not self.workers:
            raise ValueError("a placement needs at least one server and one worker")
        if 1 + len(self.servers) + len(self.workers) > BLOCK:
            raise ValueError(f"at most {BLOCK - 1} servers + workers per job")

    @property
    def single_host(self) -> bool:
        """Every process on this machine's loopback: ps-lite may use IPC instead of TCP
        (not for Mininet hosts, whose traffic must cross the fabric)."""
        return {n.ip for n in (*self.servers, *self.workers)} == {LOOPBACK}

    def bound(self, gpus) -> "HostPlan":
        """The same hosts, worker j bound to GPU index ``gpus[j]``."""
        if len(gpus) != len(self.workers):
            raise ValueError(f"{len(self.workers)} workers, {len(gpus)} GPU indices")
        return HostPlan(self.servers, tuple(Node(n.host, n.ip, int(g))
                                            for n, g in zip(self.workers, gpus)))

    @property
    def gpu_bound(self) -> bool:
        return any(n.gpu is not None for n in self.workers)

    @classmethod
    def loopback(cls, num_servers: int, num_workers: int) -> "HostPlan":
        """Every process on this machine, all on 127.0.0.1."""
        return cls(tuple(Node("local", LOOPBACK) for _ in range(num_servers)),
                   tuple(Node("local", LOOPBACK) for _ in range(num_workers)))

    @classmethod
    def on_hosts(cls, topology, servers: list[str], workers: list[str]) -> "HostPlan":
        """Hosts named in a :class:`topologies.Topology` (IPs taken from it)."""
        by_name = topology.host_by_name
        missing = [h for h in [*servers, *workers] if h not in by_name]
        if missing:
            raise ValueError(f"hosts not in topology '{topology.name}': {', '.join(missing)}")
        return cls(tuple(Node(h, by_name[h].ip) for h in servers),
                   tuple(Node(h, by_name[h].ip) for h in workers))


def placement_from_scheduler(topology, placement, gpus=None) -> HostPlan:
    """The scheduler's :class:`sluice_common.placement.Placement` (ps_hosts, worker_hosts;
    a host repeats once per GPU it gives) resolved to the hosts the launcher starts on;
    ``gpus`` (a :class:`sluice_common.placement.GpuGrant`): the k-th worker on a host is
    bound to the host's k-th GPU index."""
    plan = HostPlan.on_hosts(topology, list(placement.ps_hosts), list(placement.worker_hosts))
    return plan if gpus is None else plan.bound(gpus.per_worker(placement.worker_hosts))


def default_base_port(job_name: str) -> int:
    """A stable per-job base port (crc32 of the name; not Python's salted hash)."""
    return PORT_LOW + (zlib.crc32(job_name.encode()) % BLOCKS) * BLOCK


def reserve_base_port(hosts: Iterable[str], taken: Mapping[str, Iterable[int]],
                      preferred: int | None = None) -> int:
    """A block base free on every one of ``hosts``, given the bases other jobs hold on
    each host (``taken``): the first free block from ``preferred`` (e.g. the job name's
    :func:`default_base_port`, so that jobs spread), wrapping round. Two jobs share a
    block only on hosts they do not share. ValueError when every block is held."""
    held = {b for h in set(hosts) for b in taken.get(h, ())}
    start = 0 if preferred is None else max(0, (preferred - PORT_LOW) // BLOCK) % BLOCKS
    for k in range(BLOCKS):
        base = PORT_LOW + ((start + k) % BLOCKS) * BLOCK
        if base not in held:
            return base
    raise ValueError(f"no free PS port block on {', '.join(sorted(set(hosts)))}: all "
                     f"{BLOCKS} blocks of {BLOCK} ports in {PORT_LOW}-{EPHEMERAL_LOW - 1} "
                     "are held by running jobs")


@dataclass(frozen=True)
class PortPlan:
    base: int
    num_servers: int
    num_workers: int

    def __post_init__(self):
        if not 1024 <= self.base <= 65535 - BLOCK:
            raise ValueError(f"base port {self.base} out of range 1024..{65535 - BLOCK}")

    @classmethod
    def for_job(cls, job_name: str, placement: HostPlan, base: int | None = None) -> "PortPlan":
        return cls(default_base_port(job_name) if base is None else base,
                   len(placement.servers), len(placement.workers))

    @property
    def scheduler(self) -> int:
        return self.base

    def server(self, i: int) -> int:
        return self.base + 1 + i

    def worker(self, j: int) -> int:
        return self.base + 1 + self.num_servers + j

    def all_ports(self) -> list[int]:
        return list(range(self.base, self.base + 1 + self.num_servers + self.num_workers))


def endpoints(placement: HostPlan, ports: PortPlan) -> dict[str, list[tuple[str, int]]]:
    """What the controller needs to classify flows: push = worker -> server:port,
    pull = server:port -> worker:port."""
    return {"servers": [(n.ip, ports.server(i)) for i, n in enumerate(placement.servers)],
            "workers": [(n.ip, ports.worker(j)) for j, n in enumerate(placement.workers)]}


def worker_id(j: int) -> str:
    """The id worker j reports progress under (the controller's default endpoint id)."""
    return f"w{j}"


def server_id(i: int) -> str:
    return f"s{i}"


def registration(job_name: str, placement: HostPlan, ports: PortPlan) -> dict:
    """The controller's job registration body: ``{id, servers: [{id, ip, port}], workers,
    scheduler}`` (the ps-lite scheduler runs beside the first server)."""
    return {"id": job_name,
            "scheduler": {"id": "scheduler", "ip": placement.servers[0].ip,
                          "port": ports.scheduler},
            "servers": [{"id": server_id(i), "ip": n.ip, "port": ports.server(i)}
                        for i, n in enumerate(placement.servers)],
            "workers": [{"id": worker_id(j), "ip": n.ip, "port": ports.worker(j)}
                        for j, n in enumerate(placement.workers)]}
