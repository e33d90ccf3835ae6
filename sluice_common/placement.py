"""Where one job runs: the one placement type, from the policy's decision through the
scheduler service's store and the launcher to the report.

Hosts are named as in the topology; ``worker_hosts`` has one entry per worker (= per
GPU), so a host repeats once per GPU it gives. The launcher resolves the names to
addresses (``ps_runtime.plan.HostPlan``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    job: str                        # the job's name (sluice_common.job_id), or its service id
    ps_hosts: tuple[str, ...]
    worker_hosts: tuple[str, ...]   # one entry per worker (= per GPU); repeats allowed

    @property
    def gpus(self) -> int:
        return len(self.worker_hosts)

    def gpus_by_host(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for h in self.worker_hosts:
            out[h] = out.get(h, 0) + 1
        return out


class GpuIndexError(ValueError):
    """A GPU index that its host does not have (a record from another topology, or a
    hand-edited store): names the host and the index."""

    def __init__(self, host: str, index: int, capacity: int, job: str | None = None):
        self.host, self.index, self.capacity, self.job = host, index, capacity, job
        have = f"GPUs 0-{capacity - 1}" if capacity else "no GPU"
        who = f"job {job}: " if job else ""
        super().__init__(f"{who}host {host} has no GPU index {index} (it has {have})")


@dataclass(frozen=True)
class GpuGrant:
    """Which GPU indices of each host one job holds: ``((host, (index, ...)), ...)``,
    hosts and indices sorted, so that two equal grants compare equal. The scheduler
    names them in every start decision; the launcher gives the k-th worker on a host
    the k-th index (its ``CUDA_VISIBLE_DEVICES``)."""
    by_host: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @classmethod
    def of(cls, mapping) -> "GpuGrant":
        """From ``{host: [index, ...]}`` (a store record, JSON); indices must be whole
        numbers >= 0, each once."""
        out = []
        for host, indices in sorted(dict(mapping or {}).items()):
            ids = [int(i) for i in indices]
            if any(i < 0 for i in ids) or len(set(ids)) != len(ids) or \
                    any(isinstance(i, bool) or int(i) != i for i in indices):
                raise ValueError(f"host {host}: GPU indices must be distinct whole numbers "
                                 f">= 0, got {list(indices)}")
            if ids:
                out.append((str(host), tuple(sorted(ids))))
        return cls(tuple(out))

    def as_dict(self) -> dict[str, list[int]]:
        return {h: list(ids) for h, ids in self.by_host}

    def on(self, host: str) -> tuple[int, ...]:
        return dict(self.by_host).get(host, ())

    def per_worker(self, worker_hosts) -> list[int]:
        """Each worker's GPU index, in ``worker_hosts`` order (the k-th worker on a host
        gets the host's k-th index); ValueError when a host has fewer indices than
        workers."""
        seen: dict[str, int] = {}
        out = []
        for h in worker_hosts:
            k = seen[h] = seen.get(h, -1) + 1
            ids = self.on(h)
            if k >= len(ids):
                raise ValueError(f"host {h}: {k + 1} workers, GPU indices {list(ids)}")
            out.append(ids[k])
        return out

    def check(self, capacities, job: str | None = None) -> None:
        """Every index on a host below its GPU count (``capacities``: host -> count);
        GpuIndexError for the first that is not."""
        for h, ids in self.by_host:
            cap = capacities.get(h, 0)
            for i in ids:
                if i >= cap:
                    raise GpuIndexError(h, i, cap, job)
