"""Free GPUs per host, and which GPU indices each job holds: pure, no I/O.

:class:`ClusterState` is what every placement strategy (``job_scheduler.core.placement``)
and every loop (simulator, scheduler service, ``sluice run``) allocates on. Per host: the
free count (with per-rack / per-domain totals and free-count buckets, so that a placement
decision costs O(GPUs per host + racks), not O(hosts), on a 2,048-GPU cluster) and a bit
mask of the free GPU indices; per job (its placement's name), the indices it holds. An
allocation takes the lowest free indices unless a record names them (a decision's, the
service store's), so the same history gives the same indices in every loop.
"""

from __future__ import annotations

from typing import ItemsView

from sluice_common.placement import GpuGrant, Placement
from topologies import Topology


class ClusterState:
    """Free GPUs per host. Hosts are addressed by index internally (fast) and by name in
    :class:`Placement` (what the launcher and the controller need)."""

    def __init__(self, topology: Topology):
        self.topology = topology
        hosts = topology.hosts
        self.names = [h.name for h in hosts]
        self.index = {h.name: i for i, h in enumerate(hosts)}
        self.capacity = [h.gpus for h in hosts]
        self.free = list(self.capacity)
        racks = [r.name for r in topology.racks]
        rack_index = {r: i for i, r in enumerate(racks)}
        domains = sorted({r.domain for r in topology.racks})
        domain_index = {d: i for i, d in enumerate(domains)}
        self.rack_of = [rack_index[h.rack] for h in hosts]
        self.domain_of = [domain_index[topology.rack_by_name[h.rack].domain] for h in hosts]
        self.rack_hosts = [[i for i in range(len(hosts)) if self.rack_of[i] == r]
                           for r in range(len(racks))]
        self.domain_racks = [[r for r, rack in enumerate(topology.racks) if rack.domain == d]
                             for d in domains]
        # Liquid's Cost(a, b) ingredients: node counts of a rack, a domain, the cluster.
        self.rack_size = [len(h) for h in self.rack_hosts]
        self.domain_size = [sum(self.rack_size[r] for r in rs) for rs in self.domain_racks]
        self.cluster_size = len(hosts)
        self.rack_free = [sum(self.capacity[i] for i in hs) for hs in self.rack_hosts]
        self.domain_free = [sum(self.rack_free[r] for r in rs) for rs in self.domain_racks]
        # hosts with a free GPU per rack (Slurm's best fit counts a rack's nodes so)
        self.rack_open = [sum(1 for i in hs if self.capacity[i] > 0) for hs in self.rack_hosts]
        self.total_gpus = sum(self.capacity)
        self.total_free = self.total_gpus
        # free-count buckets: free GPUs -> hosts with exactly that many free (best fit)
        self._host_bucket: dict[int, set[int]] = {}
        for i, f in enumerate(self.free):
            self._host_bucket.setdefault(f, set()).add(i)
        # which indices: a bit mask of the free ones per host, and each job's (by its
        # placement's name; a name allocated twice holds both, as a tentative
        # allocation of two queued jobs of one name does)
        self.free_ids = [(1 << c) - 1 for c in self.capacity]
        self.held: dict[str, dict[int, list[int]]] = {}
        self.version = 0     # bumped on every change: lets callers cache per state

    # ---- changes -----------------------------------------------------------------
    def _change(self, host: int, delta: int) -> None:
        old = self.free[host]
        new = old + delta
        if new < 0 or new > self.capacity[host]:
            raise ValueError(f"host {self.names[host]}: free GPUs would become {new}")
        self._host_bucket[old].discard(host)
        self._host_bucket.setdefault(new, set()).add(host)
        self.free[host] = new
        rack = self.rack_of[host]
        self.rack_free[rack] += delta
        if (old > 0) != (new > 0):
            self.rack_open[rack] += 1 if new > 0 else -1
        self.domain_free[self.domain_of[host]] += delta
        self.total_free += delta

    def allocate(self, placement: Placement, gpus: GpuGrant | None = None) -> GpuGrant:
        """Take the placement's GPUs: the indices ``gpus`` names (a decision's, a stored
        record's), else the lowest free ones of each host. Returns the indices taken.
        Checks everything before changing anything: ValueError when a host has too few
        free, :class:`~sluice_common.placement.GpuIndexError` for an index the host does
        not have."""
        need = self._need(placement)
        for i, k in need.items():
            if self.free[i] < k:
                raise ValueError(f"{placement.job}: host {self.names[i]} has {self.free[i]} "
                                 f"free GPUs, {k} needed")
        ids = self._choose_ids(placement, need, gpus)
        for i, k in need.items():
            self._change(i, -k)
            for g in ids[i]:
                self.free_ids[i] &= ~(1 << g)
            self.held.setdefault(placement.job, {}).setdefault(i, []).extend(ids[i])
        self.version += 1
        return self._grant(ids)

    def _need(self, placement: Placement) -> dict[int, int]:
        """Host index -> the placement's workers there, in the order they first appear."""
        need: dict[int, int] = {}
        index = self.index
        for h in placement.worker_hosts:
            i = index[h]
            need[i] = need.get(i, 0) + 1
        return need

    def _grant(self, ids: dict[int, list[int]]) -> GpuGrant:
        """``GpuGrant.of`` of the state's own indices by host index: whole, distinct and
        >= 0 as the state keeps them, so there is nothing to check (each start and end
        makes one)."""
        return GpuGrant(tuple(sorted((self.names[i], tuple(sorted(v)))
                                     for i, v in ids.items() if v)))

    def _choose_ids(self, placement: Placement, need: dict[int, int],
                    gpus: GpuGrant | None) -> dict[int, list[int]]:
        if gpus is None:
            return {i: _lowest_bits(self.free_ids[i], k) for i, k in need.items()}
        named = {self.index[h]: list(v) for h, v in gpus.by_host if h in self.index}
        gpus.check({self.names[i]: self.capacity[i] for i in need}, placement.job)
        for i, k in need.items():
            got = named.get(i, [])
            if len(got) != k:
                raise ValueError(f"{placement.job}: host {self.names[i]}: {k} workers, "
                                 f"GPU indices {got}")
            taken = [g for g in got if not self.free_ids[i] >> g & 1]
            if taken:
                raise ValueError(f"{placement.job}: host {self.names[i]}: GPU(s) "
                                 f"{taken} already held")
        extra = {h for h, _ in gpus.by_host} - set(placement.worker_hosts)
        if extra:
            raise ValueError(f"{placement.job}: GPU indices on {sorted(extra)}, which has "
                             "none of its workers")
        return {i: named[i] for i in need}

    def release(self, placement: Placement) -> GpuGrant:
        """Free the placement's GPUs (the indices its job holds: the last taken first, so
        that a tentative allocate + release leaves the state as it was); returns them."""
        need = self._need(placement)
        held = self.held.get(placement.job, {})
        for i, k in need.items():
            if len(held.get(i, ())) < k:
                raise ValueError(f"{placement.job}: host {self.names[i]}: releases {k} "
                                 f"GPUs, holds {len(held.get(i, ()))}")
        freed: dict[int, list[int]] = {}
        for i, k in need.items():
            self._change(i, +k)
            ids = held[i][-k:]
            del held[i][-k:]
            if not held[i]:
                del held[i]
            for g in ids:
                self.free_ids[i] |= 1 << g
            freed[i] = ids
        if not held:
            self.held.pop(placement.job, None)
        self.version += 1
        return self._grant(freed)

    def transfer(self, src: str, dst: str) -> None:
        """The GPU indices job ``src`` holds pass to ``dst`` (a packed pair whose GPU
        holder ended first: its guest keeps the GPUs)."""
        moved = self.held.pop(src, None)
        for i, ids in (moved or {}).items():
            self.held.setdefault(dst, {}).setdefault(i, []).extend(ids)

    def holds(self, job: str) -> GpuGrant:
        """The GPU indices that placements named ``job`` hold now."""
        return GpuGrant.of({self.names[i]: v for i, v in self.held.get(job, {}).items()})

    def copy(self) -> "ClusterState":
        other = ClusterState.__new__(ClusterState)
        other.__dict__.update(self.__dict__)
        other.free = list(self.free)
        other.rack_free = list(self.rack_free)
        other.rack_open = list(self.rack_open)
        other.domain_free = list(self.domain_free)
        other._host_bucket = {k: set(v) for k, v in self._host_bucket.items()}
        other.free_ids = list(self.free_ids)
        other.held = {j: {i: list(v) for i, v in h.items()} for j, h in self.held.items()}
        return other

    # ---- Liquid's cost and fitness ---------------------------------------------------
    def cost(self, a: int, b: int) -> int:
        """Liquid's rack cost between two host indices."""
        if a == b:
            return 0
        if self.rack_of[a] == self.rack_of[b]:
            return self.rack_size[self.rack_of[a]]
        if self.domain_of[a] == self.domain_of[b]:
            return self.domain_size[self.domain_of[a]]
        return self.cluster_size

    def fitness(self, host: int, req: int = 1, extra_used: int = 0) -> float:
        """``-(ReqGPU + UsedGPU) / TotalGPU`` of a host (more negative = fuller = better)."""
        cap = self.capacity[host]
        if cap == 0:
            return 0.0
        used = cap - self.free[host] + extra_used
        return -(req + used) / cap

    def hosts_by_free(self) -> ItemsView[int, set[int]]:
        """Free GPUs -> the hosts with exactly that many free (the state's own sets:
        read them, never change them)."""
        return self._host_bucket.items()

    def smallest_host_with(self, n: int) -> int | None:
        """Best fit at host level: the host with the fewest free GPUs that still has n."""
        for f in range(n, max(self._host_bucket) + 1):
            bucket = self._host_bucket.get(f)
            if bucket:
                return min(bucket)
        return None


def _lowest_bits(mask: int, k: int) -> list[int]:
    """The ``k`` lowest set bits of ``mask`` (the lowest free GPU indices)."""
    out = []
    while len(out) < k:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
