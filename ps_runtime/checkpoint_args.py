"""The workers' side of suspend/resume (:mod:`ps_runtime.checkpoint`): their command-line
options, saving and loading one worker's state, and the last step of a suspension.
Shared by ``ps_runtime.worker`` (torch) and ``ps_runtime.emulated_worker``; torch is
imported only by the torch worker's calls."""

from __future__ import annotations

import io
import os
import sys
import time

from ps_runtime import checkpoint
from ps_runtime.quick_exit import exit_now


def add_checkpoint_arguments(ap) -> None:
    ap.add_argument("--checkpoint-dir", default=None,
                    help="suspendable: vote every batch; stop when any worker sees "
                         "DIR/SUSPEND or --suspend-at, leaving the checkpoint in DIR")
    ap.add_argument("--suspend-at", type=int, default=None,
                    help="stop after this batch (needs --checkpoint-dir)")
    ap.add_argument("--resume", default=None, metavar="DIR",
                    help="continue from the checkpoint in DIR (from its next batch)")


def resume_manifest(args) -> checkpoint.Manifest:
    try:
        return checkpoint.read_manifest(args.resume)
    except ValueError as err:
        raise SystemExit(f"worker {args.worker_index}: {err}")


def load_resume_state(args) -> dict:
    """Torch worker: the saved state this worker continues from (``batch`` = the last
    batch done)."""
    import torch

    m = resume_manifest(args)
    path = checkpoint.state_path(args.resume, checkpoint.source_worker(args.worker_index, m.workers))
    t = time.perf_counter()
    state = torch.load(path, map_location="cpu", weights_only=False)
    print(f"worker {args.worker_index}: resuming after batch {m.batch} from {path} "
          f"({time.perf_counter() - t:.3f} s to load)", file=sys.stderr, flush=True)
    state["batch"] = m.batch
    return state


def save_worker_state(args, state: dict) -> None:
    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    checkpoint.save_bytes(checkpoint.state_path(args.checkpoint_dir, args.worker_index),
                          buf.getvalue())


def finish_suspend(args, compute: str, batch: int) -> None:
    """After the KVStore's closing barrier (every worker has saved): worker 0 writes the
    manifest, which makes the checkpoint complete."""
    if args.worker_index == 0:
        checkpoint.clear_request(args.checkpoint_dir)
        checkpoint.write_manifest(args.checkpoint_dir, checkpoint.Manifest(
            job=args.job, model=args.model or "", compute=compute, batch=batch,
            batches=args.batches, workers=_num_workers(), saved_at=time.time()))
    print(f"worker {args.worker_index}: suspended after batch {batch}; checkpoint in "
          f"{args.checkpoint_dir}", file=sys.stderr, flush=True)
    # The checkpoint is complete and the KVStore closed: skip the interpreter's and
    # MXNet's teardown, which only delays the moment the job's GPUs are free again.
    exit_now(0)


def _num_workers() -> int:
    return int(os.environ.get("DMLC_NUM_WORKER", "1"))
