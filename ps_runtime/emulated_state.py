"""The emulated worker's checkpoint state: what a real worker of the model would save
and load (its parameters and the optimizer's momentum, ``2 x`` the model's float32
bytes), written by worker 0 and read back on resume, so that the suspend and resume
times measured in emulated mode include the real cost of the checkpoint I/O. The other
workers write an empty file (their replicas are identical to worker 0's)."""

from __future__ import annotations

import sys
import time

from ps_runtime import checkpoint
from ps_runtime.checkpoint import WorkerCheckpoint, resume_manifest

STATE_COPIES = 2          # parameters + SGD momentum


def state_bytes(model_bytes: float) -> float:
    """What a suspension writes (worker 0) and a resume reads back, for a model of
    ``model_bytes`` float32 gradients."""
    return STATE_COPIES * model_bytes


def save_state(ck: WorkerCheckpoint, model_bytes: int) -> None:
    size = int(state_bytes(model_bytes)) if ck.worker_index == 0 else 0
    t = time.perf_counter()
    checkpoint.save_bytes(checkpoint.state_path(ck.checkpoint_dir, ck.worker_index),
                          bytes(size))
    print(f"worker {ck.worker_index}: saved {size / 1e6:.1f} MB of state in "
          f"{time.perf_counter() - t:.3f} s", file=sys.stderr, flush=True)


def load_state(ck: WorkerCheckpoint) -> int:
    """Read this worker's saved state back; returns the last batch done."""
    m = resume_manifest(ck)
    path = checkpoint.state_path(ck.resume, checkpoint.source_worker(ck.worker_index, m.workers))
    t = time.perf_counter()
    size = len(path.read_bytes())
    print(f"worker {ck.worker_index}: resuming after batch {m.batch}, read {size / 1e6:.1f} MB "
          f"from {path} in {time.perf_counter() - t:.3f} s", file=sys.stderr, flush=True)
    return m.batch
