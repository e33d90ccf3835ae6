"""An emulated PS worker: ``python -m ps_runtime.emulated_worker --job NAME --worker-index J ...``.

Where no GPU exists, a worker that computes with torch on a shared CPU measures the CPU,
not the scheduler or the network. This worker does not import torch. Per batch it

1. waits ``Cost_bat(b)`` of the job's model from a device profile (what the GPU would
   spend on forward + backward + step), then
2. pushes and pulls through ps-lite (MXNet ``dist_sync``, exactly like the torch worker)
   the bytes the real model would, times the topology's ``emulation.bw_scale``.

The emulated fabric runs every link at ``bw_scale`` times its described bandwidth, so
moving ``bw_scale`` times the bytes takes as long as the real exchange on the real
cluster: communication/compute on the emulated fabric equals that of the unscaled
cluster, and wall-clock time is real time. The traffic the controller classifies and
prioritises is real ps-lite traffic (worker -> server:port push, server -> worker pull).

``--compute-s`` and ``--bytes-per-batch`` override the two figures directly (any size,
e.g. a heavy-tailed workload); otherwise they come from ``--model``, ``--batch-size``,
``--profile`` and ``--bw-scale`` (:func:`batch_plan`).

Prints ``batch N loss 0 time_s T comm_s C`` per batch like ``ps_runtime.worker`` (the
launcher and the run loop parse that line), and reports progress to the controller.
The launcher sets ``DMLC_ROLE=worker`` and the rest of ``DMLC_*``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

from ps_runtime.quick_exit import drop_kvstore, exit_now

BYTES_PER_VALUE = 4          # float32, as the torch worker pushes
MIN_BYTES = BYTES_PER_VALUE  # ps-lite needs at least one value per key


@dataclass(frozen=True)
class BatchPlan:
    """What one emulated batch does: wait ``compute_s``, then push and pull ``wire_bytes``."""
    compute_s: float
    wire_bytes: int          # bytes pushed per batch; the pull brings the same back
    model_bytes: int         # the unscaled gradient size of the model
    bw_scale: float
    source: str = ""         # where compute_s came from (profile device, or "given")

    def describe(self) -> str:
        return (f"compute {self.compute_s * 1000:.2f} ms per batch ({self.source}); "
                f"{self.wire_bytes / 1e6:.3f} MB pushed and pulled per batch "
                f"(model {self.model_bytes / 1e6:.1f} MB x bw_scale {self.bw_scale:g})")


def wire_bytes(model_bytes: float, bw_scale: float) -> int:
    """Bytes to move on a fabric scaled by ``bw_scale`` so that the transfer takes as long
    as ``model_bytes`` on the unscaled one; whole float32 values, at least one."""
    if not bw_scale > 0 or not math.isfinite(bw_scale):
        raise ValueError(f"bw_scale must be a finite number > 0, got {bw_scale}")
    if model_bytes < 0:
        raise ValueError(f"model bytes must be >= 0, got {model_bytes}")
    values = round(model_bytes * bw_scale / BYTES_PER_VALUE)
    return max(MIN_BYTES, values * BYTES_PER_VALUE)


def batch_plan(model: str, batch_size: int, bw_scale: float, profile=None,
               device: str | None = None, compute_s: float | None = None,
               bytes_per_batch: int | None = None) -> BatchPlan:
    """The emulated batch of a job: Cost_bat(b) from the profile (the same
    ``DeviceProfile.cost_bat`` the scheduler's estimator prices with; default profile when
    ``profile`` is None) and the model's parameter bytes (the model table) scaled by ``bw_scale``. ``compute_s`` /
    ``bytes_per_batch`` (already on the emulated fabric's scale) override either."""
    if compute_s is not None and not (compute_s >= 0 and math.isfinite(compute_s)):
        raise ValueError(f"compute seconds must be >= 0, got {compute_s}")
    if bytes_per_batch is not None and bytes_per_batch < MIN_BYTES:
        raise ValueError(f"bytes per batch must be >= {MIN_BYTES}, got {bytes_per_batch}")
    need_estimator = compute_s is None or bytes_per_batch is None
    model_bytes = 0
    source = "given"
    if need_estimator:         # imported only here: a worker given both figures starts faster
        from sluice_common.models import BYTES_PER_PARAM, params_of
        from sluice_common.profile import Profile, load_profile

        dev = (profile if isinstance(profile, Profile) else load_profile(profile)).device(device)
        params = params_of(model)
        model_bytes = params * BYTES_PER_PARAM
        if compute_s is None:
            compute_s = dev.cost_bat(model, batch_size, params)
            source = f"profile {dev.device}"
    if bytes_per_batch is None:
        bytes_per_batch = wire_bytes(model_bytes, bw_scale)
    else:
        bytes_per_batch = int(math.ceil(bytes_per_batch / BYTES_PER_VALUE)) * BYTES_PER_VALUE
        model_bytes = model_bytes or int(bytes_per_batch / bw_scale)
    return BatchPlan(float(compute_s), int(bytes_per_batch), int(model_bytes), float(bw_scale), source)


def key_lengths(total_bytes: int, bucket_bytes: int) -> list[int]:
    """float32 values per KVStore key: ``total_bytes`` cut into buckets of at most
    ``bucket_bytes`` (the torch worker's buckets; MXNet sends the keys concurrently)."""
    if bucket_bytes < BYTES_PER_VALUE:
        raise ValueError(f"bucket must hold at least one value, got {bucket_bytes} bytes")
    values = max(1, total_bytes // BYTES_PER_VALUE)
    per_key = max(1, bucket_bytes // BYTES_PER_VALUE)
    full, rest = divmod(values, per_key)
    return [per_key] * full + ([rest] if rest else [])


class EmulatedExchange:
    """Push ``key_lengths`` float32 arrays and pull the sum back, through dist_sync."""

    def __init__(self, lengths: list[int]):
        from ps_runtime.numpy_compat import import_mxnet

        mx = import_mxnet()  # DMLC_ROLE=worker: connects to the ps-lite scheduler

        self.mx = mx
        self.kv = mx.kv.create("dist_sync")
        self.keys = list(range(len(lengths)))
        self.values = [mx.nd.ones((n,), dtype="float32") for n in lengths]
        self.outs = [mx.nd.zeros((n,), dtype="float32") for n in lengths]
        self.kv.init(self.keys, self.values)
        self.kv.pull(self.keys, out=self.outs)
        self.mx.nd.waitall()

    @property
    def rank(self) -> int:
        return self.kv.rank

    @property
    def num_workers(self) -> int:
        return self.kv.num_workers

    def close(self) -> bool:
        """Leave the job now: freeing the KVStore finalises ps-lite (the closing
        barrier). True when it was freed; False while something else (a suspend vote)
        still holds it, and the barrier has not happened."""
        self.mx.nd.waitall()
        return drop_kvstore(self)

    def exchange(self, window: int = 0) -> None:
        """Push every key and pull its sum back. ``window`` > 0: at most that many keys in
        flight. Why: ps-lite sends a key's pull request on the same connection as the
        pushes, once the server has acknowledged the key's push; with every push queued at
        once, the requests wait behind all of them and the pulls start only when the pushes
        end (push, then pull: one direction of the link busy at a time). Holding back later
        pushes lets each pull overlap the next pushes, as buckets leaving a backward pass
        do (sluice_common.exchange: 3 keys in flight of 8 take 1.5 key-times a key
        instead of 2)."""
        if window <= 0 or window >= len(self.keys):
            self.kv.push(self.keys, self.values)
            self.kv.pull(self.keys, out=self.outs)
        else:
            for k in self.keys:
                if k >= window:
                    self.outs[k - window].wait_to_read()
                self.kv.push(k, self.values[k])
                self.kv.pull(k, out=self.outs[k])
        self.mx.nd.waitall()          # the pull has arrived: the batch's exchange is over


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m ps_runtime.emulated_worker",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--job", required=True)
    ap.add_argument("--worker-index", type=int, required=True)
    ap.add_argument("--batches", type=int, required=True)
    ap.add_argument("--model", default=None, help="model name (job_scheduler's model table)")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--profile", default=None, help="device profile YAML (default: the shipped one)")
    ap.add_argument("--profile-device", default=None, help="device in a multi-device profile")
    ap.add_argument("--bw-scale", type=float, default=1.0,
                    help="the topology's emulation.bw_scale (bytes on the wire = model bytes x this)")
    ap.add_argument("--compute-s", type=float, default=None,
                    help="seconds of compute per batch (overrides the profile)")
    ap.add_argument("--bytes-per-batch", type=int, default=None,
                    help="bytes pushed (and pulled) per batch on the wire (overrides model x bw_scale)")
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    ap.add_argument("--pipeline-keys", type=int, default=0,
                    help="keys in flight per batch (0: push all, then pull all)")
    ap.add_argument("--controller", default=None, help="controller API base URL")
    ap.add_argument("--token", default=os.environ.get("SLUICE_PROGRESS_TOKEN"))
    ap.add_argument("--report-interval", type=float, default=0.2,
                    help="seconds between progress reports when the controller gives no "
                         "hint (with one, reports follow it: ps_runtime/progress.py)")
    from ps_runtime.train_checkpoint import add_worker_arguments

    add_worker_arguments(ap)
    args = ap.parse_args(argv)
    if (args.compute_s is None or args.bytes_per_batch is None) and (
            args.model is None or args.batch_size is None):
        ap.error("--model and --batch-size are needed unless --compute-s and "
                 "--bytes-per-batch are both given")
    if args.batches < 1:
        ap.error("--batches must be >= 1")
    if args.pipeline_keys < 0:
        ap.error("--pipeline-keys must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    from ps_runtime.watchdog import start_watchdog

    start_watchdog()
    args = parse_args(argv)
    from ps_runtime.train_checkpoint import worker_checkpoint_of

    ck = worker_checkpoint_of(args)
    started = time.perf_counter()
    plan = batch_plan(args.model or "", args.batch_size or 1, args.bw_scale, args.profile,
                      args.profile_device, args.compute_s, args.bytes_per_batch)
    print(f"worker {args.worker_index} of job {args.job}: emulated compute, {plan.describe()}",
          file=sys.stderr, flush=True)
    from ps_runtime.gpu_binding import record_worker

    record_worker(args.worker_index, "emulated", "emulated")   # its GPU index, if bound
    first = 1
    if ck.resume:               # the model state a real worker would load
        from ps_runtime.emulated_state import load_state

        first = load_state(ck) + 1
    kv = EmulatedExchange(key_lengths(plan.wire_bytes, int(args.bucket_mb * 2 ** 20)))
    vote = None
    if ck.checkpoint_dir:
        from ps_runtime.checkpoint import SuspendVote

        vote = SuspendVote(kv.mx, kv.kv, ck.checkpoint_dir, ck.suspend_at)
    suspended = None
    print(f"worker {args.worker_index}: ps-lite rank {kv.rank} of {kv.num_workers}, "
          f"{len(kv.keys)} keys, ready {time.perf_counter() - started:.2f} s after start",
          file=sys.stderr, flush=True)
    reporter = None
    if args.controller:
        from ps_runtime.plan import worker_id
        from ps_runtime.progress import ProgressReporter, controller_sender

        reporter = ProgressReporter(controller_sender(args.controller, args.token), args.job,
                                    worker_id(args.worker_index), args.report_interval)
    for batch in range(first, args.batches + 1):
        if reporter:
            reporter.report(batch)
        if vote:
            vote.cast(batch)
        t0 = time.perf_counter()
        if plan.compute_s > 0:
            time.sleep(plan.compute_s)
        t_comm = time.perf_counter()
        kv.exchange(args.pipeline_keys)
        done = time.perf_counter()
        print(f"batch {batch} loss 0 time_s {done - t0:.4f} comm_s {done - t_comm:.4f}", flush=True)
        if vote and batch < args.batches and vote.decided():
            suspended = batch
            break
    if reporter:
        reporter.close()
    if suspended:
        from ps_runtime.checkpoint import finish_suspend
        from ps_runtime.emulated_state import save_state

        save_state(ck, plan.model_bytes)
        vote.release()
        t_close = time.perf_counter()
        kv.close()              # the closing barrier: every worker has saved before it
        print(f"worker {args.worker_index}: left the job in {time.perf_counter() - t_close:.3f} s",
              file=sys.stderr, flush=True)
        finish_suspend(ck, "emulated", suspended)
        return 0
    t_done = time.perf_counter()
    print(f"worker {args.worker_index}: done after {args.batches} batches", file=sys.stderr,
          flush=True)
    if vote:
        vote.release()          # it holds the KVStore too
    if kv.close():              # the closing barrier (it waits for the whole job)
        print(f"worker {args.worker_index}: left the job in "
              f"{time.perf_counter() - t_done:.3f} s", file=sys.stderr, flush=True)
        exit_now(0)             # ps_runtime.quick_exit: skip MXNet's slow teardown
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DMLC_ROLE", "worker")
    raise SystemExit(main())
