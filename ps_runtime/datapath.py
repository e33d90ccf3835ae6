"""Sum flat host buffers over all workers through MXNet's ``dist_sync`` KVStore, without copies.

    kv = FlatKVStore(import_mxnet(), [torch.empty(n, pin_memory=True) for n in sizes])
    kv.init()                       # rank 0's values everywhere
    for i in ready_order:           # e.g. as buckets come out of the backward pass
        kv.push_pull(i)             # asynchronous; MXNet's engine orders pull after push
    kv.wait_all()                   # buffers now hold the sum over all workers

Each key is one flat float32 (or float16) torch tensor on the host. MXNet reads and
writes that very memory: the NDArray is a zero-copy DLPack view of the tensor, so a push
sends straight from it, and a pull into the same array lands in it (MXNet skips its own
copy when the pull target is the array it pushed from). Any torch tensor works; pass pinned
ones when the data comes from a GPU so that the device copies are asynchronous.

Sharding: MXNet splits every key of at least ``MXNET_KVSTORE_BIGARRAY_BOUND`` elements
evenly over all servers; :func:`ps_env` sets that bound so that each bucket the worker
makes is split, which spreads the bytes over every server of the job (one job's servers
may share a host). Smaller keys go to one server each.

The emulated-compute worker and the benchmark use this class as well: it needs nothing
but flat host tensors.
"""

from __future__ import annotations

import time

from ps_runtime.quick_exit import drop_kvstore

# Buckets of at least this many float32 elements (1 MiB) are split over all servers.
BIGARRAY_BOUND = 2 ** 18
# Servers a loopback job runs by default (`sluice train`): ps-lite's server loop is one
# thread per process, so several processes on one host carry more bytes (bench/RESULTS.md,
# "PS runtime": MXNet's kvstore alone moves 0.75-0.80 GB/s with one server, 1.4-1.7 with
# four).
DEFAULT_LOOPBACK_SERVERS = 4
# The key :meth:`FlatKVStore.broadcast` stages float32 values through: far above any bucket
# number, and not ps_runtime.checkpoint's VOTE_KEY (999_983).
STAGING_KEY = 999_979
STAGING_ELEMENTS = 2 ** 20          # 4 MB of float32 per round


def ps_env(single_host: bool) -> dict[str, str]:
    """ps-lite/MXNet settings for every process of a job. ``single_host``: all its
    processes share one machine, so ZeroMQ's IPC transport (Unix sockets, under /tmp)
    replaces loopback TCP: fewer copies and no TCP stack (ps-lite's ``DMLC_LOCAL``)."""
    env = {"MXNET_KVSTORE_BIGARRAY_BOUND": str(BIGARRAY_BOUND)}
    if single_host:
        env["DMLC_LOCAL"] = "1"
    return env


class FlatKVStore:
    """Keys ``0..len(buffers)-1`` of a ``dist_sync`` KVStore over flat host tensors."""

    def __init__(self, mx, buffers: list, kv=None):
        import torch.utils.dlpack   # here, not at import: `sluice` reads this module's constants

        for b in buffers:
            if b.device.type != "cpu" or b.dim() != 1 or not b.is_contiguous():
                raise ValueError("FlatKVStore needs flat, contiguous host tensors")
        self.mx = mx
        self.kv = kv if kv is not None else mx.kv.create("dist_sync")
        self.buffers = buffers
        self.keys = list(range(len(buffers)))
        # Zero-copy: the NDArrays share the tensors' memory (DLPack).
        self.arrays = [mx.nd.from_dlpack(torch.utils.dlpack.to_dlpack(b)) for b in buffers]
        self.issued: list[int] = []

    @property
    def num_workers(self) -> int:
        return self.kv.num_workers

    @property
    def rank(self) -> int:
        return self.kv.rank

    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers)

    def init(self) -> None:
        """Store rank 0's buffers on the servers and pull them into every worker's."""
        self.kv.init(self.keys, self.arrays)
        self.kv.pull(self.keys, out=self.arrays)
        self.mx.nd.waitall()

    def broadcast(self, values: list) -> None:
        """Overwrite every worker's ``values`` (flat float32 host tensors, the same sizes
        on every worker) with rank 0's, bit for bit, whatever the buckets' wire type.

        With 16-bit buckets, ``init`` rounds what it stores; this path does not: rank 0
        pushes its values through a float32 staging key and every other worker pushes
        -0.0, so the servers' sum is rank 0's bits (x + -0.0 == x for every x, -0.0
        and +0.0 included; +0.0 would turn rank 0's -0.0 into +0.0). Set-up only: one
        push + pull round per ``STAGING_ELEMENTS`` values."""
        import torch

        staging = torch.empty(STAGING_ELEMENTS)
        array = self.mx.nd.from_dlpack(torch.utils.dlpack.to_dlpack(staging))
        self.kv.init(STAGING_KEY, array)
        self.mx.nd.waitall()
        for value in values:
            if value.dtype != torch.float32 or value.dim() != 1:
                raise ValueError("broadcast needs flat float32 tensors")
            for start in range(0, value.numel(), STAGING_ELEMENTS):
                chunk = value[start:start + STAGING_ELEMENTS]
                staging.fill_(-0.0)
                if self.rank == 0:
                    staging[:chunk.numel()].copy_(chunk)
                self.kv.push(STAGING_KEY, array)
                self.kv.pull(STAGING_KEY, out=array)
                array.wait_to_read()
                chunk.copy_(staging[:chunk.numel()])
        self.mx.nd.waitall()
        del array                   # before the tensor under it (see close)

    def push_pull(self, i: int) -> None:
        """Send buffer ``i`` and ask for the sum back into it (returns at once)."""
        self.kv.push(i, self.arrays[i])
        self.kv.pull(i, out=self.arrays[i])
        self.issued.append(i)

    def push_pull_all(self) -> None:
        self.kv.push(self.keys, self.arrays)
        self.kv.pull(self.keys, out=self.arrays)
        self.issued.extend(self.keys)

    def close(self) -> bool:
        """Leave the job: MXNet's KVStore finalises ps-lite (a barrier with the other
        workers) when it is freed. Done here, in order, before interpreter exit frees
        the tensors under the zero-copy arrays in no particular order (which aborts).
        True when it was freed (the barrier is done); False while something else still
        holds it."""
        self.mx.nd.waitall()
        self.arrays = []
        return drop_kvstore(self)

    def wait_all(self) -> tuple[float, float]:
        """Block until every issued key's sum has landed. Returns (seconds until the
        first landed, seconds from then until the last): the wait for the servers and
        the slowest worker, then the tail of the pulls."""
        t0 = time.perf_counter()
        first = None
        for i in self.issued:
            self.arrays[i].wait_to_read()
            if first is None:
                first = time.perf_counter()
        end = time.perf_counter()
        self.issued = []
        if first is None:
            return 0.0, 0.0
        return first - t0, end - first

