"""Suspend a PS job at a batch boundary and resume it later, anywhere (Gandiva's mechanism).

Where the state lives: sluice's servers only sum gradients (``dist_sync`` with no server
updater); every worker applies the same SGD step to its own replica, so the parameters,
the optimizer's momentum and the batch counter live in the workers, identical on all of
them (batch-norm running statistics are per worker). A checkpoint is therefore

    DIR/worker<j>.state     worker j's state (torch: parameters, buffers, optimizer
                            state, RNG; emulated: the model's bytes, written and read
                            back so that the cost is real)
    DIR/manifest.json       written last, once every worker has saved: the job, the
                            last finished batch, the batches per worker, the worker count

The servers and the ps-lite scheduler hold nothing that outlives a batch: they exit
when the workers leave.

Agreeing on the batch: synchronous workers are never more than one batch apart, but a
request seen by one worker between two of its batches may not have been seen by the
others yet. So the decision travels through the KVStore itself (:class:`SuspendVote`):
each batch every worker pushes 1 when it wants to stop (``--suspend-at K`` reached, or
the request file ``DIR/SUSPEND`` exists) and pulls the sum; the sum is the same on every
worker, so all stop after the same batch. The vote is pushed at the start of the batch
and read at its end: it rides along with the gradients and costs no extra round trip.

The workers' side (:class:`WorkerCheckpoint`: saving and loading one worker's state, the
last step of a suspension) is shared by ``ps_runtime.worker`` (torch) and
``ps_runtime.emulated_worker``; torch is imported only by the torch worker's calls.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ps_runtime.quick_exit import exit_now

MANIFEST = "manifest.json"
REQUEST = "SUSPEND"
# A KVStore key far above any bucket number (buckets are 0..n-1).
VOTE_KEY = 999_983


@dataclass(frozen=True)
class WorkerCheckpoint:
    """One worker's part in suspend/resume: the job and the worker it is (the manifest
    and the messages name them), and where its checkpoint goes and comes from."""
    job: str
    worker_index: int
    batches: int                      # batches per worker of the whole job
    model: str = ""                   # "" when an emulated worker has none
    checkpoint_dir: str | None = None     # suspendable: vote every batch, save here
    suspend_at: int | None = None     # stop after this batch
    resume: str | None = None         # continue from the checkpoint in this directory


@dataclass(frozen=True)
class Manifest:
    job: str
    model: str
    compute: str              # torch | emulated
    batch: int                # the last batch every worker finished
    batches: int              # batches per worker of the whole job
    workers: int              # worker count when it was suspended
    saved_at: float           # time.time() when the last worker had saved

    @property
    def finished(self) -> bool:
        return self.batch >= self.batches


def manifest_path(directory: str | Path) -> Path:
    return Path(directory) / MANIFEST


def read_manifest(directory: str | Path) -> Manifest:
    """The checkpoint in ``directory``; ValueError naming the file if it is missing or bad."""
    path = manifest_path(directory)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: no checkpoint (a job writes it when it is suspended)")
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: unreadable checkpoint manifest: {err}")
    try:
        m = Manifest(**data)
    except TypeError as err:
        raise ValueError(f"{path}: bad checkpoint manifest: {err}")
    if not (isinstance(m.batch, int) and isinstance(m.batches, int) and 0 < m.batch
            and isinstance(m.workers, int) and m.workers > 0):
        raise ValueError(f"{path}: batch and workers must be integers > 0, got {data}")
    return m


def write_manifest(directory: str | Path, manifest: Manifest) -> None:
    _atomic_write(manifest_path(directory), json.dumps(asdict(manifest), indent=1).encode())


def state_path(directory: str | Path, worker: int) -> Path:
    return Path(directory) / f"worker{worker}.state"


def source_worker(worker: int, saved_workers: int) -> int:
    """Whose state worker ``worker`` of a resumed job loads: its own when the job had it,
    else one of the saved ones (the parameters and momentum are the same on all)."""
    return worker % saved_workers


def resized_last_batch(done: int, last: int, workers: int, n: int) -> int:
    """The last batch of a job resumed after batch ``done`` of ``last`` on ``n`` workers
    instead of ``workers``: the same samples left, spread over n workers,
    ``done + ceil((last - done) * workers / n)``. Pure."""
    return done + math.ceil((last - done) * workers / n)


def request_suspend(directory: str | Path) -> Path:
    """Ask a running job to stop after the batch in progress (its workers look for this
    file every batch)."""
    path = Path(directory) / REQUEST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{time.time()}\n")
    return path


def clear_request(directory: str | Path) -> None:
    try:
        (Path(directory) / REQUEST).unlink()
    except FileNotFoundError:
        pass


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # No fsync: a suspend hands the state to the next launch through the (shared) file
    # system, which needs the atomic rename, not durability across a power cut (an
    # fsync of a large checkpoint cost seconds on a busy machine).
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def save_bytes(path: Path, data: bytes) -> None:
    _atomic_write(path, data)


class SuspendVote:
    """Every worker's wish to stop, summed through the job's KVStore once per batch."""

    def __init__(self, mx, kv, directory: str | Path, suspend_at: int | None = None):
        self.mx = mx
        self.kv = kv
        self.request = Path(directory) / REQUEST
        self.suspend_at = suspend_at
        self.mine = mx.nd.zeros((1,), dtype="float32")
        self.total = mx.nd.zeros((1,), dtype="float32")
        kv.init(VOTE_KEY, self.mine)          # every worker, in the same order as its keys

    def wants(self, batch: int) -> bool:
        return batch == self.suspend_at or self.request.exists()

    def cast(self, batch: int) -> None:
        """Push this worker's vote for ``batch`` (asynchronous)."""
        self.mine[:] = 1.0 if self.wants(batch) else 0.0
        self.kv.push(VOTE_KEY, self.mine)
        self.kv.pull(VOTE_KEY, out=self.total)

    def decided(self) -> bool:
        """After the batch's exchange: did any worker vote to stop? (same on all)"""
        return float(self.total.asnumpy()[0]) > 0

    def release(self) -> None:
        """Drop the KVStore, so that closing it (the workers' barrier) is not held up
        by this reference."""
        self.kv = None


# ---- a worker's side ----------------------------------------------------------------

def resume_manifest(ck: WorkerCheckpoint) -> Manifest:
    try:
        return read_manifest(ck.resume)
    except ValueError as err:
        raise SystemExit(f"worker {ck.worker_index}: {err}")


def load_resume_state(ck: WorkerCheckpoint) -> dict:
    """Torch worker: the saved state this worker continues from (``batch`` = the last
    batch done)."""
    import torch

    m = resume_manifest(ck)
    path = state_path(ck.resume, source_worker(ck.worker_index, m.workers))
    t = time.perf_counter()
    state = torch.load(path, map_location="cpu", weights_only=False)
    print(f"worker {ck.worker_index}: resuming after batch {m.batch} from {path} "
          f"({time.perf_counter() - t:.3f} s to load)", file=sys.stderr, flush=True)
    state["batch"] = m.batch
    return state


def save_worker_state(ck: WorkerCheckpoint, state: dict) -> None:
    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    save_bytes(state_path(ck.checkpoint_dir, ck.worker_index), buf.getvalue())


def finish_suspend(ck: WorkerCheckpoint, compute: str, batch: int) -> None:
    """After the KVStore's closing barrier (every worker has saved): worker 0 writes the
    manifest, which makes the checkpoint complete."""
    if ck.worker_index == 0:
        clear_request(ck.checkpoint_dir)
        write_manifest(ck.checkpoint_dir, Manifest(
            job=ck.job, model=ck.model, compute=compute, batch=batch,
            batches=ck.batches, workers=_num_workers(), saved_at=time.time()))
    print(f"worker {ck.worker_index}: suspended after batch {batch}; checkpoint in "
          f"{ck.checkpoint_dir}", file=sys.stderr, flush=True)
    # The checkpoint is complete and the KVStore closed: skip the interpreter's and
    # MXNet's teardown, which only delays the moment the job's GPUs are free again.
    exit_now(0)


def _num_workers() -> int:
    return int(os.environ.get("DMLC_NUM_WORKER", "1"))
