"""A PS worker: ``python -m ps_runtime.worker --job NAME --worker-index J --model M ...``.

Synchronous data-parallel training through MXNet's ``dist_sync`` KVStore (ps-lite):
torch computes the gradients, they travel in a few flat buckets (one KVStore key per
bucket of ~``--bucket-mb`` MB), the server sums the pushes of all workers, each worker
pulls the sum, divides by the number of workers and takes the optimizer step itself.
Every worker applies the same averaged gradient to the same initial weights (pulled
from the KVStore once, so they agree even across devices), so all replicas stay equal.

Gradients travel as they come out of the backward pass (:class:`GradientSync`): each
bucket is pushed as soon as its last gradient is accumulated, so the transfer of the
last layers overlaps the backward pass of the first ones (as ByteScheduler and P3 do).

Prints ``batch N loss X time_s T comm_s C`` per batch (N from 1; C is the part spent
waiting for the KVStore after the backward pass) on stdout, followed by the stage times
``compute_s d2h_s push_s wait_s pull_s h2d_s update_s`` (see :data:`STAGES`), and
reports the current batch to the controller in the background (``ps_runtime.progress``).
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

import torch
from torch import nn

from ps_runtime.checkpoint import (SuspendVote, WorkerCheckpoint, finish_suspend,
                                   load_resume_state, save_worker_state)
from ps_runtime.data import SyntheticImages
from ps_runtime.datapath import FlatKVStore
from ps_runtime.gpu_binding import device_uuid, record_worker
from ps_runtime.numpy_compat import import_mxnet
from ps_runtime.models import MODEL_NAMES, build_model, input_shape
from ps_runtime.plan import worker_id
from ps_runtime.progress import ProgressReporter, controller_sender
from ps_runtime.train_checkpoint import add_worker_arguments, worker_checkpoint_of
from ps_runtime.watchdog import start_watchdog


def pick_device(choice: str) -> torch.device:
    """``auto``: this process's CUDA device where it has one (``CUDA_VISIBLE_DEVICES``
    narrows what it sees to its own GPU: index 0 is that one), else the CPU."""
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


class GradientSync:
    """The gradients of ``params`` summed over all workers, bucket by bucket, as each
    bucket comes out of the backward pass.

    Each bucket's gradients are views into one flat tensor on the compute device (torch
    accumulates into them in place), so a bucket moves as one piece and no Python loop
    runs per parameter on the hot path. On CUDA each finished bucket is copied to a
    pinned host buffer on a side stream (asynchronous), and pushed as soon as that copy
    is done, while the backward pass goes on; on CPU the flat gradient is itself the
    host buffer. MXNet reads and writes the host buffers in place
    (:class:`~ps_runtime.datapath.FlatKVStore`); the sum comes back into them and one
    asynchronous copy per bucket takes it to the device.
    """

    def __init__(self, mx, params: list[nn.Parameter], bucket_bytes: int,
                 device: torch.device, overlap: bool = True, fp16: bool = False):
        # Backward produces the last layers' gradients first: bucket from the end.
        self.buckets = make_buckets(list(reversed(params)), bucket_bytes)
        self.device = device
        self.cuda = device.type == "cuda"
        self.overlap = overlap
        self.flat = [torch.zeros(sum(p.numel() for p in b), device=device) for b in self.buckets]
        for bucket, flat in zip(self.buckets, self.flat):
            for p, view in zip(bucket, _views(flat, bucket)):
                p.grad = view
        # fp16: the buckets travel (and are summed on the servers) as 16-bit floats, half
        # the bytes; cast on the device, so the copies move half as much too.
        self.fp16 = fp16
        wire = torch.float16 if fp16 else torch.float32
        self.wire = ([torch.empty(f.numel(), dtype=wire, device=device) for f in self.flat]
                     if fp16 else self.flat)
        if self.cuda:
            self.host = [torch.empty(f.numel(), dtype=wire, pin_memory=True) for f in self.flat]
            self.copy_stream = torch.cuda.Stream(device)
            self.d2h_done = [torch.cuda.Event(enable_timing=True) for _ in self.flat]
            self.d2h_start = [torch.cuda.Event(enable_timing=True) for _ in self.flat]
        else:
            self.host = self.wire
        self.kv = FlatKVStore(mx, self.host)
        self.bucket_of = {id(p): i for i, b in enumerate(self.buckets) for p in b}
        self.stages = dict.fromkeys(STAGES, 0.0)
        self._reset()
        if overlap:
            for p in params:
                p.register_post_accumulate_grad_hook(self._on_grad_ready)

    @property
    def num_workers(self) -> int:
        return self.kv.num_workers

    def _reset(self) -> None:
        self.remaining = [len(b) for b in self.buckets]
        self.copying: list[int] = []        # D2H issued, not yet pushed (CUDA)
        self.pushed = [False] * len(self.buckets)

    def sync_initial_weights(self, params: list[nn.Parameter]) -> None:
        """Every worker starts from rank 0's weights, bit for bit (set-up only). With
        float32 buckets they are the keys' ``init`` values; 16-bit buckets would round
        them, so then they travel as float32 through :meth:`FlatKVStore.broadcast`."""
        with torch.no_grad():
            weights = [torch.cat([p.detach().reshape(-1).to("cpu", torch.float32)
                                  for p in bucket]) for bucket in self.buckets]
            for host, value in zip(self.host, weights):
                host.copy_(value)
            self.kv.init()          # creates the keys on the servers
            if self.fp16:
                self.kv.broadcast(weights)
            else:
                weights = self.host
            for bucket, value in zip(self.buckets, weights):
                for p, v in zip(bucket, _views(value.to(self.device), bucket)):
                    p.copy_(v)

    def zero_grad(self) -> None:
        for flat in self.flat:
            flat.zero_()
        self._reset()
        self.stages = dict.fromkeys(STAGES, 0.0)

    # ---- push side: called from the backward pass (hooks) or after it -----------------
    def _on_grad_ready(self, p: torch.Tensor) -> None:
        i = self.bucket_of[id(p)]
        self.remaining[i] -= 1
        if self.remaining[i] == 0:
            self._bucket_ready(i)
        self._push_copied(block=False)

    def _bucket_ready(self, i: int) -> None:
        t = time.perf_counter()
        if self.cuda:
            # The gradient kernels are queued on the current stream: copy after them.
            self.copy_stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.copy_stream):
                self.d2h_start[i].record()
                if self.fp16:
                    self.wire[i].copy_(self.flat[i])
                self.host[i].copy_(self.wire[i], non_blocking=True)
                self.d2h_done[i].record()
            self.copying.append(i)
        else:
            if self.fp16:
                self.wire[i].copy_(self.flat[i])
            self._push(i)
        self.stages["push"] += time.perf_counter() - t

    def _push(self, i: int) -> None:
        self.kv.push_pull(i)
        self.pushed[i] = True

    def _push_copied(self, block: bool) -> None:
        """Push the buckets whose device-to-host copy has finished (all if ``block``)."""
        t = time.perf_counter()
        still = []
        for i in self.copying:
            if block:
                self.d2h_done[i].synchronize()
            if block or self.d2h_done[i].query():
                self._push(i)
            else:
                still.append(i)
        self.copying = still
        self.stages["push"] += time.perf_counter() - t

    def allreduce(self) -> None:
        """After backward: push what is left, wait for every sum, leave the mean in the
        parameters' ``.grad``."""
        for i in range(len(self.buckets)):
            if not self.pushed[i] and i not in self.copying:
                self._bucket_ready(i)
        self._push_copied(block=True)
        wait, pull = self.kv.wait_all()
        self.stages["wait"] += wait
        self.stages["pull"] += pull
        t = time.perf_counter()
        scale = 1.0 / self.num_workers
        if self.cuda:
            self.stages["d2h"] = sum(a.elapsed_time(b) for a, b in
                                     zip(self.d2h_start, self.d2h_done)) / 1000
            for flat, wire, host in zip(self.flat, self.wire, self.host):
                wire.copy_(host, non_blocking=True)
                if self.fp16:
                    flat.copy_(wire)
            torch._foreach_mul_(self.flat, scale)
            torch.cuda.current_stream(self.device).synchronize()
        else:
            if self.fp16:
                torch._foreach_copy_(self.flat, self.wire)
            torch._foreach_mul_(self.flat, scale)
        self.stages["h2d"] += time.perf_counter() - t


# Per-step stage times a worker prints: compute = forward + backward (pushes issued from
# its hooks included); d2h = device-to-host copies (GPU time, overlapped); push = host
# time spent issuing pushes; wait = after backward, until the first sum has landed (the
# transfers still in flight, the servers, the slowest worker); pull = from then until the
# last sum has landed; h2d = copying the sums back and averaging; update = optimizer.
STAGES = ("compute", "d2h", "push", "wait", "pull", "h2d", "update")


def _views(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    out, offset = [], 0
    for t in like:
        out.append(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()
    return out


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
    ap.add_argument("--no-overlap", action="store_true",
                    help="push only after the whole backward pass (default: each bucket as "
                         "soon as its gradients are ready)")
    ap.add_argument("--compress", default="none", choices=("none", "fp16"),
                    help="fp16: gradients travel and are summed as 16-bit floats")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch default)")
    ap.add_argument("--gpu-memory-fraction", type=float, default=None,
                    help="packing: cap this process at this share of the GPU's memory "
                         "(torch.cuda.set_per_process_memory_fraction; ignored on the CPU)")
    ap.add_argument("--controller", default=None, help="controller API base URL")
    ap.add_argument("--token", default=os.environ.get("SLUICE_PROGRESS_TOKEN"),
                    help="job token for progress reports (default: $SLUICE_PROGRESS_TOKEN, "
                         "which the launcher sets)")
    ap.add_argument("--report-interval", type=float, default=0.2,
                    help="seconds between progress reports when the controller gives no "
                         "hint (with one, reports follow it: ps_runtime/progress.py)")
    add_worker_arguments(ap)
    return ap.parse_args(argv)


def open_device(choice: str, memory_fraction: float | None, ck: WorkerCheckpoint,
                batch_size: int) -> torch.device:
    """This worker's device (``choice``: auto | cpu | cuda; its own GPU where it has one),
    its memory share when packed (``memory_fraction``, None: all of it), and its ran-on
    record (``ps_runtime.gpu_binding``: host GPU index, device, UUID). ``ck`` and
    ``batch_size`` name the worker in its first line."""
    device = pick_device(choice)
    if memory_fraction is not None and device.type == "cuda":
        # a packed job (job_scheduler.core.mechanisms.Packing): an allocation past its share fails here
        # instead of starving the job it shares the GPU with
        torch.cuda.set_per_process_memory_fraction(memory_fraction, device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    ran = record_worker(ck.worker_index, "torch", str(device), device_uuid(device))
    gpu = f", host GPU {ran['gpu']}" if ran and ran["gpu"] is not None else ""
    print(f"worker {ck.worker_index} of job {ck.job}: computing on {device.type} ({where}"
          f"{gpu}), model {ck.model}, batch size {batch_size}", file=sys.stderr, flush=True)
    return device


def finish(ck: WorkerCheckpoint, model, optimizer, params, sync, vote, reporter,
           suspended: int | None) -> int:
    """After the last batch (or the one the job was suspended after): the checkpoint, the
    weights checksum, the KVStore's closing barrier."""
    if suspended:
        save_worker_state(ck, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                               "rng": torch.get_rng_state(), "batch": suspended})
    if reporter:
        reporter.close()
    # Synchronous training keeps every replica's parameters identical (batch-norm running
    # statistics are buffers, not synchronised): the tests compare this line across workers.
    with torch.no_grad():
        checksum = float(sum(p.double().sum() for p in params))
    print(f"weights_checksum {checksum:.12e}", flush=True)
    if vote:
        vote.release()
    left = sync.kv.close()      # a barrier: every worker has saved its state after it
    if suspended:
        finish_suspend(ck, "torch", suspended)
        return 0
    print(f"worker {ck.worker_index}: done after {ck.batches} batches", file=sys.stderr,
          flush=True)
    if left:                    # after the closing barrier: skip MXNet's slow teardown
        from ps_runtime.quick_exit import exit_now

        exit_now(0)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start_watchdog()            # no-op if already running (see the top of this module)
    ck = worker_checkpoint_of(args)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = open_device(args.device, args.gpu_memory_fraction, ck, args.batch_size)
    torch.manual_seed(args.seed)
    model = build_model(args.model, args.num_classes, args.input_size).to(device)
    shape = input_shape(args.model, args.input_size)
    model.eval()                # a shape probe: no batch-norm statistics, no graph
    with torch.no_grad():
        num_classes = model(torch.zeros(1, *shape, device=device)).shape[1]
    data = SyntheticImages(num_classes, shape, seed=args.seed, device=device)
    params = [p for p in model.parameters() if p.requires_grad]
    resume = load_resume_state(ck) if ck.resume else None   # ps_runtime.checkpoint
    if resume:
        model.load_state_dict(resume["model"])
        torch.set_rng_state(resume["rng"])
    mx = import_mxnet()         # DMLC_ROLE=worker: connects to the ps-lite scheduler
    sync = GradientSync(mx, params, int(args.bucket_mb * 2 ** 20), device,
                        overlap=not args.no_overlap, fp16=args.compress == "fp16")
    sync.sync_initial_weights(params)
    print(f"worker {args.worker_index}: ps-lite rank {sync.kv.rank} of {sync.num_workers}, "
          f"{len(sync.buckets)} keys, {sum(p.numel() for p in params)} parameters, "
          f"{sync.kv.nbytes() / 1e6:.1f} MB per push", file=sys.stderr, flush=True)

    reporter = None
    if args.controller:
        reporter = ProgressReporter(controller_sender(args.controller, args.token), args.job,
                                    worker_id(args.worker_index), args.report_interval)
    optimizer = torch.optim.SGD(params, lr=args.lr, momentum=0.9, foreach=True)
    if resume:
        optimizer.load_state_dict(resume["optimizer"])
    vote = (SuspendVote(mx, sync.kv.kv, ck.checkpoint_dir, ck.suspend_at)
            if ck.checkpoint_dir else None)
    first = resume["batch"] + 1 if resume else 1
    suspended = None
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for batch in range(first, args.batches + 1):
        if reporter:
            reporter.report(batch)
        if vote:
            vote.cast(batch)
        t0 = time.perf_counter()
        x, y = data.batch(args.batch_size, batch, worker=args.worker_index)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        sync.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()         # pushes buckets as they are ready (hooks)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t_comm = time.perf_counter()
        sync.stages["compute"] = t_comm - t0
        sync.allreduce()
        t_update = time.perf_counter()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        end = time.perf_counter()
        sync.stages["update"] = end - t_update
        # comm_s: what the step waited for the KVStore after the backward pass (pushes
        # not yet done, the other workers, pulls, copies back); stage times follow.
        stages = " ".join(f"{k}_s {v:.4f}" for k, v in sync.stages.items())
        print(f"batch {batch} loss {loss.item():.6f} time_s {end - t0:.4f} "
              f"comm_s {t_update - t_comm:.4f} {stages}", flush=True)
        if vote and batch < args.batches and vote.decided():
            suspended = batch
            break
    return finish(ck, model, optimizer, params, sync, vote, reporter, suspended)


if __name__ == "__main__":
    os.environ.setdefault("DMLC_ROLE", "worker")
    raise SystemExit(main())
