"""A PS worker: ``python -m ps_runtime.worker --job NAME --worker-index J --model M ...``.

Synchronous data-parallel training through MXNet's ``dist_sync`` KVStore (ps-lite):
torch computes the gradients, they travel in a few flat buckets (one KVStore key per
bucket of ~``--bucket-mb`` MB), the server sums the pushes of all workers, each worker
pulls the sum, divides by the number of workers and takes the optimizer step itself.
Every worker applies the same averaged gradient to the same initial weights (pulled
from the KVStore once, so they agree even across devices), so all replicas stay equal.

Prints ``batch N loss X time_s T comm_s C`` per batch (N from 1; C is the KVStore part) on stdout, and reports the
current batch to the controller in the background (``ps_runtime.progress``).
The launcher sets ``DMLC_ROLE=worker`` and the rest of ``DMLC_*``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if __name__ == "__main__":
    # Before the slow imports below (seconds on a busy CPU): a launcher that dies while
    # we import torch must not leave us behind.
    from ps_runtime.watchdog import start_watchdog

    start_watchdog()

import numpy as np
import torch
from torch import nn

from ps_runtime.data import SyntheticImages
from ps_runtime.models import MODEL_NAMES, build_model, input_shape
from ps_runtime.plan import worker_id
from ps_runtime.progress import ProgressReporter, controller_sender
from ps_runtime.watchdog import start_watchdog


def pick_device(choice: str) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available on this machine")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def make_buckets(params: list[nn.Parameter], bucket_bytes: int) -> list[list[nn.Parameter]]:
    """Consecutive parameters grouped into buckets of at most ``bucket_bytes`` (a single
    larger tensor gets a bucket of its own)."""
    buckets: list[list[nn.Parameter]] = [[]]
    size = 0
    for p in params:
        nbytes = p.numel() * 4
        if buckets[-1] and size + nbytes > bucket_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append(p)
        size += nbytes
    return buckets


def _flat(tensors: list[torch.Tensor]) -> np.ndarray:
    return torch.cat([t.detach().reshape(-1) for t in tensors]).to("cpu", torch.float32).numpy()


def _unflat(flat: np.ndarray, like: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    out, offset = [], 0
    src = torch.from_numpy(flat).to(device)
    for t in like:
        out.append(src[offset:offset + t.numel()].view_as(t))
        offset += t.numel()
    return out


class KVStoreSync:
    """The dist_sync KVStore seen as 'sum these buckets over all workers'."""

    def __init__(self, buckets: list[list[nn.Parameter]], device: torch.device):
        import mxnet as mx  # DMLC_ROLE=worker: connects to the ps-lite scheduler

        self.mx = mx
        self.kv = mx.kv.create("dist_sync")
        self.buckets = buckets
        self.device = device
        self.keys = list(range(len(buckets)))
        self.outs = [mx.nd.zeros((sum(p.numel() for p in b),), dtype="float32") for b in buckets]

    @property
    def num_workers(self) -> int:
        return self.kv.num_workers

    def sync_initial_weights(self) -> None:
        """Only rank 0's ``init`` values are stored; everyone pulls them."""
        mx = self.mx
        self.kv.init(self.keys, [mx.nd.array(_flat(b), dtype="float32") for b in self.buckets])
        self.kv.pull(self.keys, out=self.outs)
        with torch.no_grad():
            for bucket, out in zip(self.buckets, self.outs):
                for p, value in zip(bucket, _unflat(out.asnumpy(), bucket, self.device)):
                    p.copy_(value)

    def allreduce_gradients(self) -> int:
        """Push every bucket's gradient, pull the sum, leave the mean in ``p.grad``.
        Returns the bytes pushed."""
        mx = self.mx
        values = [mx.nd.array(_flat([p.grad for p in b]), dtype="float32") for b in self.buckets]
        # One call per direction for all buckets: MXNet's engine sends them concurrently.
        self.kv.push(self.keys, values)
        self.kv.pull(self.keys, out=self.outs)
        n = self.num_workers
        for bucket, out in zip(self.buckets, self.outs):
            for p, value in zip(bucket, _unflat(out.asnumpy(), bucket, self.device)):
                p.grad.copy_(value).div_(n)
        return sum(v.size * 4 for v in values)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m ps_runtime.worker", description=__doc__.split("\n")[0])
    ap.add_argument("--job", required=True)
    ap.add_argument("--worker-index", type=int, required=True,
                    help="sluice's worker number (data shard, progress reports)")
    ap.add_argument("--model", required=True, choices=MODEL_NAMES)
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--batches", type=int, required=True)
    ap.add_argument("--input-size", type=int, default=64)
    ap.add_argument("--num-classes", type=int, default=None)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch default)")
    ap.add_argument("--controller", default=None, help="controller API base URL")
    ap.add_argument("--token", default=os.environ.get("SLUICE_PROGRESS_TOKEN"),
                    help="job token for progress reports (default: $SLUICE_PROGRESS_TOKEN, "
                         "which the launcher sets)")
    ap.add_argument("--report-interval", type=float, default=0.2)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start_watchdog()            # no-op if already running (see the top of this module)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"worker {args.worker_index} of job {args.job}: computing on {device.type} ({where}), "
          f"model {args.model}, batch size {args.batch_size}", file=sys.stderr, flush=True)

    torch.manual_seed(args.seed)
    model = build_model(args.model, args.num_classes, args.input_size).to(device)
    shape = input_shape(args.model, args.input_size)
    model.eval()                # a shape probe: no batch-norm statistics, no graph
    with torch.no_grad():
        num_classes = model(torch.zeros(1, *shape, device=device)).shape[1]
    data = SyntheticImages(num_classes, shape, seed=args.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.zeros_like(p)
    kv = KVStoreSync(make_buckets(params, int(args.bucket_mb * 2 ** 20)), device)
    kv.sync_initial_weights()
    print(f"worker {args.worker_index}: ps-lite rank {kv.kv.rank} of {kv.num_workers}, "
          f"{len(kv.keys)} keys, {sum(p.numel() for p in params)} parameters",
          file=sys.stderr, flush=True)

    reporter = None
    if args.controller:
        reporter = ProgressReporter(controller_sender(args.controller, args.token), args.job,
                                    worker_id(args.worker_index), args.report_interval)
    optimizer = torch.optim.SGD(params, lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for batch in range(1, args.batches + 1):
        if reporter:
            reporter.report(batch)
        t0 = time.perf_counter()
        x, y = data.batch(args.batch_size, batch, worker=args.worker_index)
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        if device.type == "cuda":
            torch.cuda.synchronize()
        t_comm = time.perf_counter()
        kv.allreduce_gradients()
        comm_s = time.perf_counter() - t_comm
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        # comm_s: push + wait for the other workers + pull, copies included.
        print(f"batch {batch} loss {loss.item():.6f} time_s {time.perf_counter() - t0:.4f} "
              f"comm_s {comm_s:.4f}", flush=True)
    if reporter:
        reporter.close()
    # Synchronous training keeps every replica's parameters identical (batch-norm running
    # statistics are buffers, not synchronised): the tests compare this line across workers.
    with torch.no_grad():
        checksum = float(sum(p.double().sum() for p in params))
    print(f"weights_checksum {checksum:.12e}", flush=True)
    print(f"worker {args.worker_index}: done after {args.batches} batches", file=sys.stderr,
          flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DMLC_ROLE", "worker")
    raise SystemExit(main())
