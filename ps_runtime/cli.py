"""``sluice profile`` and ``sluice train``: the PS runtime's user entry points.

    sluice profile --models resnet18,alexnet --batch-sizes 1,2,4,8 --out prof.yaml --plot fit.png
    sluice train jobs.yaml --job small --workers 2 --servers 1 --batches 50

Every argument is checked before anything is measured or started (bad input: exit 2).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from ps_runtime.datapath import DEFAULT_LOOPBACK_SERVERS
from ps_runtime.train_checkpoint import CheckpointOptions
from sluice_common.errors import InputError, as_flags

DEFAULT_TRAIN_OUT = Path("out") / "train"


# ---- shared argument checks ------------------------------------------------------------

def _int_list(text: str, flag: str) -> list[int]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise InputError("argument", "must be a comma-separated list of integers", field=flag)
    out = []
    for item in items:
        if not item.isdigit() or int(item) < 1:
            raise InputError("argument", f"must be integers >= 1, got {item!r}", field=flag)
        out.append(int(item))
    return sorted(set(out))


def _positive(value, flag: str, minimum: float = 1):
    if value is not None and value < minimum:
        raise InputError("argument", f"must be >= {minimum:g}, got {value}", field=flag)


def _device(choice: str):
    import torch

    if choice == "cuda" and not torch.cuda.is_available():
        raise InputError("argument", "CUDA is not available on this machine", field="--device")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def _writable_parent(path: str, flag: str) -> Path:
    p = Path(path)
    if not p.parent.is_dir():
        raise InputError(str(p), f"directory {str(p.parent)!r} does not exist", field=flag)
    return p


# ---- sluice profile ----------------------------------------------------------------------

def configure_profile(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", default="resnet18,alexnet,vgg16,googlenet",
                        help="comma-separated: smallcnn, resnet18, alexnet, vgg16, googlenet")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32",
                        help="comma-separated batch sizes; 1 is always measured (Cost_bat(1))")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--out", required=True, metavar="PROFILE",
                        help="profile YAML to write (sluice_common.profile format)")
    parser.add_argument("--plot", default=None, metavar="PNG", help="fitted vs measured plot")
    parser.add_argument("--input-size", type=int, default=64,
                        help="image side in pixels (smallcnn is always 1x28x28)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed iterations first")
    parser.add_argument("--repeats", type=int, default=5, help="timed iterations")
    parser.add_argument("--stat", default="median", choices=("median", "min"),
                        help="statistic of the timed iterations (min: on a shared machine)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (0: torch's default). 1 by default, like each "
                             "worker of `sluice train`: OpenMP threads on a shared CPU spin "
                             "and measure the neighbours, not the model")


def run_profile(args: argparse.Namespace) -> int:
    from ps_runtime.models import MODEL_NAMES

    models = [m.strip().lower() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODEL_NAMES]
    if not models or unknown:
        raise InputError("argument", f"unknown model {unknown[0] if unknown else '(none)'!r} "
                         f"(profilable: {', '.join(MODEL_NAMES)})", field="--models")
    batch_sizes = _int_list(args.batch_sizes, "--batch-sizes")
    if 1 not in batch_sizes:
        batch_sizes = [1] + batch_sizes          # Cost_bat(1) is what the profile is for
    _positive(args.input_size, "--input-size", 16)
    _positive(args.warmup, "--warmup", 0)
    _positive(args.repeats, "--repeats", 1)
    _positive(args.threads, "--threads", 0)
    out = _writable_parent(args.out, "--out")
    plot = _writable_parent(args.plot, "--plot") if args.plot else None
    device = _device(args.device)

    import torch

    from sluice_common.profile import save_profile
    from ps_runtime import profiler

    if args.threads:
        torch.set_num_threads(args.threads)
    label = profiler.device_label(device)
    profiler.log(f"device {label} ({device.type}, {torch.get_num_threads()} CPU threads); "
                 f"models {', '.join(models)}; batch sizes {batch_sizes}; input "
                 f"{args.input_size}x{args.input_size}; warm-up {args.warmup}, "
                 f"{args.stat} of {args.repeats}")
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    from sluice_common.progress import count_bar
    bar, points = count_bar("profile", "points"), len(models) * len(batch_sizes)
    measured = [0]
    bar(0, points)

    def progress(line: str) -> None:
        profiler.log(line)
        measured[0] += 1
        bar(measured[0], points)
    results = profiler.profile_models(models, batch_sizes, device, args.input_size,
                                      args.warmup, args.repeats, progress, args.stat)
    for model, points in results.items():
        print(profiler.format_fit(model, points))
    source = (f"sluice profile on {label}: forward+backward+SGD step, synthetic "
              f"{args.input_size}x{args.input_size} RGB input (smallcnn 1x28x28), 1000 classes "
              f"(smallcnn 10), warm-up {args.warmup}, {args.stat} of {args.repeats}, torch "
              f"{torch.__version__}, {torch.get_num_threads()} threads")
    header = (f"Measured by: sluice profile --models {','.join(models)} --batch-sizes "
              f"{','.join(map(str, batch_sizes))} --device {device.type} --input-size "
              f"{args.input_size} --warmup {args.warmup} --repeats {args.repeats} "
              f"--stat {args.stat} --threads {args.threads}\n"
              f"on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"{time.monotonic() - started:.0f} s, load average {load_before:.1f} before and "
              f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs).\n"
              "Fit alpha(b) = 1 + beta*(b-1)^gamma, max |fitted - measured| / measured: "
              + ", ".join(f"{m} {profiler.max_fit_error(p) * 100:.0f}%"
                          for m, p in results.items()) + ".")
    save_profile(out, label, results, source=source, header=header)
    print(f"wrote {out} (device {label})")
    if plot:
        profiler.plot_fit(results, plot, f"Cost_bat(b) on {label}: measured vs fitted")
        print(f"wrote {plot}")
    return 0


# ---- sluice train ------------------------------------------------------------------------

def configure_train(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("jobs", metavar="JOBS.yaml", help="job description file")
    parser.add_argument("--job", required=True, help="name of the job to run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-gpus", default=None, metavar="I,J,...",
                        help="each worker's GPU index on this host (its CUDA_VISIBLE_DEVICES), "
                             "one per worker (default: no binding)")
    parser.add_argument("--servers", type=int, default=None,
                        help="parameter servers, all on this host (default: the job's "
                             "num_ps, at least 4)")
    parser.add_argument("--batches", type=int, default=None,
                        help="batches per worker (default: dataset_size*epochs/(batch_size*workers))")
    parser.add_argument("--controller", default=None, metavar="URL",
                        help="controller API base URL for progress reports")
    parser.add_argument("--token", default=None, help="job token for progress reports")
    parser.add_argument("--out", default=None, help=f"log directory (default {DEFAULT_TRAIN_OUT}/JOB)")
    parser.add_argument("--base-port", type=int, default=None,
                        help="first port of the job's port block (default: from the job name)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds before giving up")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--input-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    parser.add_argument("--quiet", action="store_true", help="no per-batch lines")
    parser.add_argument("--compress", default="fp16", choices=("none", "fp16"),
                        help="torch workers' gradients on the wire: fp16 (default) travel and "
                             "are summed as 16-bit floats, half the bytes, weights and update "
                             "stay float32 (same loss curve: "
                             "tests/unit/ps_runtime/test_worker_fp16.py); none: float32")
    parser.add_argument("--bw-scale", type=float, default=1.0,
                        help="emulated compute: bytes on the wire = model bytes x this (default 1)")
    add_compute_arguments(parser)
    from ps_runtime.train_checkpoint import add_train_arguments

    add_train_arguments(parser)


def add_compute_arguments(parser, compute: bool = True) -> None:
    """``--compute`` and ``--profile``, the same on every command that runs or estimates."""
    from ps_runtime.compute import COMPUTE_MODES

    if compute:
        parser.add_argument("--compute", default="auto", choices=("auto",) + COMPUTE_MODES,
                            help="workers' compute: torch (real), emulated (waits Cost_bat(b) "
                                 "of the profile, moves the model's bytes); auto: torch when "
                                 "a CUDA device is present, else emulated")
    parser.add_argument("--profile", default=None, metavar="FILE|NAME",
                        help="device profile for Cost_bat: a `sluice profile` YAML, or h100 "
                             "(default, measured on an H100) or p100 (derived)")


@dataclass(frozen=True)
class TrainOptions:
    """``sluice train``'s options, built once from its namespace (:func:`train_options`);
    the defaults are the parser's."""
    jobs: str                         # the job file
    job: str                          # the job's name in it
    workers: int = 2
    worker_gpus: str | None = None    # "I,J,...": each worker's GPU index on this host
    servers: int | None = None        # None: the job's num_ps, at least DEFAULT_LOOPBACK_SERVERS
    batches: int | None = None        # None: dataset_size*epochs/(batch_size*workers)
    controller: str | None = None     # controller API base URL for progress reports
    token: str | None = None
    out: str | None = None            # None: DEFAULT_TRAIN_OUT/JOB (resume: DIR/resumed)
    base_port: int | None = None      # None: from the job name
    timeout: float = 3600.0
    device: str = "auto"
    input_size: int = 64
    lr: float = 0.01
    threads: int = 1
    quiet: bool = False
    compress: str = "fp16"
    bw_scale: float = 1.0
    compute: str = "auto"
    profile: str | None = None
    checkpoint: CheckpointOptions = field(default_factory=CheckpointOptions)
    # the scheduler service's identity of the job at the controller
    # ($SLUICE_CONTROLLER_JOB_ID; None when unset or empty)
    controller_job: str | None = None


def train_options(args: argparse.Namespace,
                  environ: Mapping[str, str] = os.environ) -> TrainOptions:
    """The namespace of :func:`configure_train` as :class:`TrainOptions` (no checks yet:
    :func:`train` makes them, in the order the user reads them)."""
    names = {f.name for f in fields(TrainOptions)} - {"checkpoint", "controller_job"}
    return TrainOptions(**{n: getattr(args, n) for n in names},
                        checkpoint=CheckpointOptions(suspend_at=args.suspend_at,
                                                     suspendable=args.suspendable,
                                                     resume=args.resume),
                        controller_job=environ.get("SLUICE_CONTROLLER_JOB_ID") or None)


def _check_train_numbers(opts: TrainOptions, servers: int) -> None:
    from ps_runtime.plan import BLOCK

    for value, flag in ((opts.workers, "--workers"), (servers, "--servers"),
                        (opts.batches, "--batches"), (opts.threads, "--threads")):
        _positive(value, flag)
    _positive(opts.timeout, "--timeout", 0.001)
    _positive(opts.input_size, "--input-size", 16)
    if not (opts.lr > 0 and math.isfinite(opts.lr)):
        raise InputError("argument", f"must be a number > 0, got {opts.lr}", field="--lr")
    if 1 + servers + opts.workers > BLOCK:
        raise InputError("argument", f"at most {BLOCK - 1} servers + workers per job",
                         field="--workers")
    if opts.base_port is not None and not 1024 <= opts.base_port <= 65535 - BLOCK:
        raise InputError("argument", f"must be 1024..{65535 - BLOCK}", field="--base-port")
    if opts.controller and not opts.controller.startswith(("http://", "https://")):
        raise InputError("argument", f"must be an http(s) URL, got {opts.controller!r}",
                         field="--controller")


def _worker_gpus(worker_gpus: str | None, workers: int) -> list[int] | None:
    """``--worker-gpus 0,1``: worker j's GPU index on this host (its CUDA_VISIBLE_DEVICES),
    one per worker; the scheduler service's local executor passes its decision's."""
    if worker_gpus is None:
        return None
    try:
        gpus = [int(g) for g in worker_gpus.split(",")]
    except ValueError:
        gpus = []
    if len(gpus) != workers or any(g < 0 for g in gpus):
        raise InputError("argument", f"must be {workers} GPU indices >= 0 (one per worker), "
                         f"comma-separated, got {worker_gpus!r}", field="--worker-gpus")
    return gpus


def _train_and_report(job, spec, batches: int, timeout: float, quiet: bool) -> int:
    from ps_runtime.launcher import JobFailed

    def on_batch(worker: int, rec) -> None:
        if not quiet:
            print(f"worker {worker} batch {rec.batch}/{batches} loss {rec.loss:.4f} "
                  f"time_s {rec.time_s:.3f}", flush=True)

    old = signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))
    from ps_runtime.train_checkpoint import suspend_on_usr1

    suspend_on_usr1(job)
    try:
        with job:
            job.start()
            result = job.wait(timeout=timeout, on_batch=on_batch)
    except JobFailed as err:
        print(f"sluice train: {err}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, old)
    losses = [r.loss for recs in result.batches.values() for r in recs]
    first = [recs[0].loss for recs in result.batches.values() if recs]
    last = [recs[-1].loss for recs in result.batches.values() if recs]
    steps = [r.time_s for recs in result.batches.values() for r in recs[1:]]
    print(f"job {spec.name} done in {result.elapsed_s:.1f} s: {len(losses)} worker-batches, "
          f"loss {statistics.mean(first):.4f} -> {statistics.mean(last):.4f}, median step "
          f"{statistics.median(steps) * 1000 if steps else float('nan'):.1f} ms")
    from ps_runtime.train_checkpoint import report_end

    report_end(job, result)
    return 0


def _port_busy(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # ZMQ binds with SO_REUSEADDR too: ports in TIME-WAIT after a run are fine.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def run_train(args: argparse.Namespace) -> int:
    return train(train_options(args))


def train(opts: TrainOptions) -> int:
    """Check every option, then run the job (exit status: 0 done or suspended, 1 failed)."""
    from sluice_common.jobspec import load_jobs
    from ps_runtime.plan import HostPlan

    from sluice_common.models import MODELS
    from ps_runtime.compute import describe, resolve_compute

    jobs = {j.name: j for j in load_jobs(opts.jobs)}
    if opts.job not in jobs:
        raise InputError(opts.jobs, f"no job named '{opts.job}' (jobs: {', '.join(jobs)})",
                         field="--job")
    spec = jobs[opts.job]
    # A device named on the command line asks for real compute on it.
    try:
        compute = resolve_compute("torch" if opts.compute == "auto" and opts.device != "auto"
                                  else opts.compute)
    except InputError as err:
        raise as_flags(err, {"compute": "--compute"}) from None
    info = describe(compute, opts.profile, opts.device)
    if not (opts.bw_scale > 0 and math.isfinite(opts.bw_scale)):
        raise InputError("argument", f"must be a number > 0, got {opts.bw_scale}", field="--bw-scale")
    if compute == "torch":     # ps_runtime.models imports torch: only when it computes
        from ps_runtime.models import MODEL_NAMES
    else:                      # the emulated worker needs a parameter count and a profile
        MODEL_NAMES = tuple(MODELS)          # noqa: N806
    if spec.model not in MODEL_NAMES:
        raise InputError(opts.jobs, f"model '{spec.model}' cannot be trained by the PS runtime "
                         f"(trainable: {', '.join(MODEL_NAMES)})", element=f"job '{spec.name}'",
                         field="model")
    # Loopback servers share this host: several ps-lite server processes carry more bytes
    # than one (every bucket is split over all of them), see ps_runtime.datapath.
    servers = (opts.servers if opts.servers is not None
               else max(spec.num_ps, DEFAULT_LOOPBACK_SERVERS))
    _check_train_numbers(opts, servers)
    gpus = _worker_gpus(opts.worker_gpus, opts.workers)
    batches = opts.batches or max(1, math.ceil(spec.dataset_size * spec.epochs
                                               / (spec.batch_size * opts.workers)))
    from ps_runtime.train_checkpoint import checkpoint_options

    batches, ckpt = checkpoint_options(opts.checkpoint, spec, batches, compute,
                                       asked_batches=opts.batches)
    if compute == "torch":
        _device(opts.device)
    from ps_runtime.transport_install import TransportMissing, ensure_mxnet

    try:
        ensure_mxnet()
    except TransportMissing as err:
        print(f"sluice train: {err}", file=sys.stderr)
        return 1
    print(f"sluice train: compute {info['compute']}, device {info['device']}, profile "
          f"{info['profile']}", file=sys.stderr)

    from ps_runtime.launcher import PSJob, WorkerOptions
    from ps_runtime.runners import LocalRunner

    resume = opts.checkpoint.resume
    out = Path(opts.out) if opts.out else (Path(resume) / "resumed" if resume
                                           else DEFAULT_TRAIN_OUT / spec.name)
    hosts = HostPlan.loopback(servers, opts.workers)
    job = PSJob(spec, hosts.bound(gpus) if gpus else hosts, LocalRunner(), out,
                batches=batches, base_port=opts.base_port, controller_url=opts.controller,
                token=opts.token, controller_job=opts.controller_job,
                options=WorkerOptions(input_size=opts.input_size, lr=opts.lr,
                                      device=opts.device, threads=opts.threads,
                                      compute=compute, profile=opts.profile,
                                      bw_scale=opts.bw_scale, compress=opts.compress,
                                      **ckpt(out)))
    busy = [p for p in job.ports.all_ports() if _port_busy(p)]
    if busy:
        print(f"sluice train: port(s) {', '.join(map(str, busy))} of job '{spec.name}' are in "
              "use on 127.0.0.1; pick another block with --base-port", file=sys.stderr)
        return 1
    print(f"job {spec.name}: {spec.model}, batch size {spec.batch_size}, {opts.workers} "
          f"workers, {servers} server(s), {batches} batches per worker; logs in {out}",
          file=sys.stderr)
    print(f"endpoints {job.endpoints()}", file=sys.stderr)

    return _train_and_report(job, spec, batches, opts.timeout, opts.quiet)
