"""PS data path: push + pull throughput on loopback and the step time of real PS jobs.

    python -m bench.ps_runtime.ps_datapath [--quick] [--json OUT.json] [--device auto|cpu|cuda]

1. Push + pull GB/s (2 x gradient bytes / median time of one push + pull round, per
   worker) for 10, 100 and 500 MB with 1 and 2 workers, through
   - the project's data path with its default settings (``ps_runtime.datapath``:
     zero-copy flat buckets of the worker's bucket size, sharded over
     ``DEFAULT_LOOPBACK_SERVERS`` servers, ps-lite over IPC, the launcher's environment);
   - MXNet's kvstore alone, the baseline: one array pushed from and pulled into plain
     NDArrays, MXNet's default settings, one server ("raw"), and the same with the
     project's number of servers ("raw_same_servers").
   Same bytes, separate processes (scheduler, servers, workers), no torch on the raw side.
   Both sides move float32 bytes: gradient compression, which halves what goes on the
   wire, is left out here so that the bytes compared are the same; it counts in 2.
2. Step / compute for smallcnn, resnet18, alexnet and vgg16 on the device present: the
   median step of a real 1-worker job (``ps_runtime.launcher.PSJob``, the settings of
   `sluice train`: 4 servers, 4 MB buckets, overlap, fp16 gradients unless ``--compress none``)
   against the same model's training step alone in this process (``measure_step``), and
   the worker's median stage times.

``--quick``: 100 MB and 1 worker only, fewer rounds and batches, and on a CPU 32 px
images instead of 64 (the check's mode; minutes on 2 cores).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from ps_runtime.ports import free_port_block

from bench import harness
from bench.harness import ROOT

# model -> (batch size, input pixels on CUDA) as in the H100 figures (bench/RESULTS.md,
# "PS runtime")
STEP_MODELS = {"smallcnn": (32, 28), "resnet18": (64, 224), "alexnet": (128, 224),
               "vgg16": (32, 224)}
CPU_INPUT = 64                  # CPU runs use 64 px images, like `sluice train`
CPU_INPUT_QUICK = 32            # --quick on a CPU: a quarter of the pixels, so the check's
                                # mode stays in minutes on 2 cores (vgg16 b32 64 px: ~8 s/step)


# ---- one push/pull measurement: the worker side ----------------------------------------

def kv_worker(mode: str, mbytes: float, rounds: int, bucket_mb: float) -> None:
    """Runs inside a ps-lite worker process; prints one ``RESULT {json}`` line."""
    from ps_runtime.numpy_compat import import_mxnet

    mx = import_mxnet()
    n = int(mbytes * 1e6 / 4)
    times = []
    if mode.startswith("project"):
        import torch

        from ps_runtime.datapath import FlatKVStore

        per = max(1, int(bucket_mb * 2 ** 20 / 4))
        sizes = [min(per, n - i) for i in range(0, n, per)]
        kv = FlatKVStore(mx, [torch.full((s,), 1.0) for s in sizes])
        kv.init()
        for _ in range(rounds):
            t0 = time.perf_counter()
            kv.push_pull_all()
            kv.wait_all()
            times.append(time.perf_counter() - t0)
        workers = kv.num_workers
        ok = [float(kv.buffers[-1][-1]), float(workers ** rounds)]   # summed each round
        ok = ok[0] == ok[1] or ok
        kv.close()
    else:
        kv = mx.kv.create("dist_sync")
        value, out = mx.nd.ones((n,)), mx.nd.zeros((n,))
        kv.init(0, value)
        kv.pull(0, out=out)
        out.wait_to_read()
        for _ in range(rounds):
            t0 = time.perf_counter()
            kv.push(0, value)
            kv.pull(0, out=out)
            out.wait_to_read()
            times.append(time.perf_counter() - t0)
        workers = kv.num_workers
        # MXNet pulls into the array a CPU push was sent from, then copies to ``out``:
        # each round pushes the previous sum, as the project's path does.
        ok = [float(out[-1].asscalar()), float(workers ** rounds)]
        ok = ok[0] == ok[1] or ok
    times = times[1:] if len(times) > 2 else times          # first round warms up
    med = statistics.median(times)
    print("RESULT " + json.dumps({"seconds": med, "gbytes_per_s": 2 * n * 4 / med / 1e9,
                                  "sum_ok": ok}), flush=True)




def push_pull(mode: str, mbytes: float, workers: int, servers: int, rounds: int,
              bucket_mb: float) -> float:
    """GB/s of one configuration (mean over workers), from real ps-lite processes."""
    from ps_runtime.datapath import ps_env

    base = free_port_block(1 + servers + workers)
    env = dict(os.environ, DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(base),
               DMLC_NUM_SERVER=str(servers), DMLC_NUM_WORKER=str(workers),
               DMLC_NODE_HOST="127.0.0.1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    for key in ("DMLC_LOCAL", "MXNET_KVSTORE_BIGARRAY_BOUND", "OMP_NUM_THREADS",
                "MXNET_CPU_WORKER_NTHREADS"):
        env.pop(key, None)       # the raw baseline runs with MXNet's defaults
    if mode.startswith("project"):   # what ps_runtime.launcher gives every process
        env.update(ps_env(single_host=mode != "project_tcp"), OMP_NUM_THREADS="1",
                   MXNET_CPU_WORKER_NTHREADS="1")
    procs = [subprocess.Popen([sys.executable, "-m", "ps_runtime.server"], cwd=ROOT,
                              env=dict(env, DMLC_ROLE="scheduler", PORT=str(base)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    procs += [subprocess.Popen([sys.executable, "-m", "ps_runtime.server"], cwd=ROOT,
                               env=dict(env, DMLC_ROLE="server", PORT=str(base + 1 + i)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for i in range(servers)]
    argv = [sys.executable, "-m", "bench.ps_runtime.ps_datapath", "--kv-worker", mode, str(mbytes), str(rounds),
            str(bucket_mb)]
    wprocs = [subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True,
                               env=dict(env, DMLC_ROLE="worker",
                                        PORT=str(base + 1 + servers + j)))
              for j in range(workers)]
    try:
        results = []
        for w in wprocs:
            out, err = w.communicate(timeout=600)
            lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
            if w.returncode or not lines:
                raise RuntimeError(f"{mode} worker failed (exit {w.returncode}):\n{err[-1500:]}")
            results.append(json.loads(lines[-1][7:]))
        for p in procs:
            p.wait(timeout=60)
    finally:
        for p in procs + wprocs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if not all(r["sum_ok"] is True for r in results):
        raise RuntimeError(f"{mode}: the pulled sums are wrong (got, expected): "
                           f"{[r['sum_ok'] for r in results]}")
    return statistics.mean(r["gbytes_per_s"] for r in results)


# ---- steps of real jobs ----------------------------------------------------------------

def job_step(model: str, batch_size: int, input_size: int, device: str, batches: int,
             threads: int, servers: int, bucket_mb: float, compress: str) -> dict:
    from sluice_common.jobspec import JobSpec
    from ps_runtime.launcher import PSJob, WorkerOptions
    from ps_runtime.plan import HostPlan
    from ps_runtime.runners import LocalRunner

    spec = JobSpec(name=f"bench-{model}", model=model, dataset_size=batch_size * batches,
                   epochs=1, batch_size=batch_size, max_gpus=1)
    with tempfile.TemporaryDirectory() as out:
        job = PSJob(spec, HostPlan.loopback(servers, 1), LocalRunner(), out,
                    batches=batches, base_port=free_port_block(2 + servers),
                    options=WorkerOptions(input_size=input_size, device=device,
                                          threads=threads, bucket_mb=bucket_mb,
                                          compress=compress))
        with job:
            job.start()
            job.wait(timeout=1200)
            lines = (Path(out) / "worker0.log").read_text().splitlines()
    stages = [parse_stages(l) for l in lines if l.startswith("batch ")]
    stages = stages[1:] if len(stages) > 1 else stages              # batch 1 warms up
    return {k: statistics.median(s[k] for s in stages) for k in stages[0]}


def parse_stages(line: str) -> dict[str, float]:
    """``batch N loss X time_s T comm_s C compute_s ...`` -> {time_s: T, comm_s: C, ...}."""
    words = line.split()
    return {words[i]: float(words[i + 1]) for i in range(4, len(words) - 1, 2)}


def compute_alone(model: str, batch_size: int, input_size: int, device, threads: int,
                  repeats: int) -> float:
    import torch

    from ps_runtime.profiler import measure_step

    if threads:
        torch.set_num_threads(threads)
    return measure_step(model, batch_size, device, input_size, warmup=1 if repeats < 3 else 3,
                        repeats=repeats)


def device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def push_pull_table(report: dict, sizes: list, worker_counts: list[int], servers: int,
                    rounds: int, bucket_mb: float, quick: bool) -> None:
    """Push + pull GB/s per size and worker count: the project's path, raw KVStore with
    one server and with as many as the project's, over TCP too (not ``quick``)."""
    print(f"push + pull GB/s on loopback (2 x bytes / time, per worker); project = "
          f"{servers} servers, {bucket_mb:g} MB buckets, zero-copy, IPC", flush=True)
    print(f"{'size':>6} {'workers':>7} {'project':>8} {'raw 1 srv':>10} "
          f"{'raw {} srv'.format(servers):>10} {'project/raw1':>12}", flush=True)
    for workers in worker_counts:
        for mb in sizes:
            key = f"{mb}MB" if workers == 1 else f"{mb}MB_{workers}w"
            # Interleaved in one run, so the machine's load hits every variant alike.
            raw1 = push_pull("raw", mb, workers, 1, rounds, bucket_mb)
            proj = push_pull("project", mb, workers, servers, rounds, bucket_mb)
            rawn = push_pull("raw", mb, workers, servers, rounds, bucket_mb)
            report["push_pull_gbytes_per_s"][key] = round(proj, 4)
            report["raw_kvstore_gbytes_per_s"][key] = round(raw1, 4)
            report["raw_kvstore_same_servers_gbytes_per_s"][key] = round(rawn, 4)
            tcp = ""
            if not quick:      # attribution: the same path over loopback TCP
                tcpv = push_pull("project_tcp", mb, workers, servers, rounds, bucket_mb)
                report["project_over_tcp_gbytes_per_s"][key] = round(tcpv, 4)
                tcp = f"   (project over TCP: {tcpv:.2f})"
            print(f"{mb:>4}MB {workers:>7} {proj:>8.2f} {raw1:>10.2f} {rawn:>10.2f} "
                  f"{proj / raw1:>11.2f}x{tcp}", flush=True)


def steps_table(report: dict, models: list[str], device, choice: str, servers: int,
                bucket_mb: float, compress: str, threads: int, quick: bool) -> None:
    """Per model: a 1-worker job's step against its compute alone, stage by stage."""
    # quick: the median of 4 batches (2 was at the mercy of one noisy batch on 2 cores)
    batches = 5 if quick else 12
    print(f"steps on {device.type}: median of batches 2..{batches} of a 1-worker job "
          f"({servers} servers, compress {compress}) vs the step alone", flush=True)
    for model in models:
        batch_size, cuda_px = STEP_MODELS[model]
        px = cuda_px if device.type == "cuda" else min(
            cuda_px, CPU_INPUT_QUICK if quick else CPU_INPUT)
        if model == "smallcnn":
            px = 28
        compute = compute_alone(model, batch_size, px, device, threads,
                                repeats=2 if quick else 10)
        stages = job_step(model, batch_size, px, choice, batches, threads, servers,
                          bucket_mb, compress)
        step = stages["time_s"]
        report["steps"][model] = {"batch_size": batch_size, "input_size": px,
                                  "step_s": round(step, 5), "compute_s": round(compute, 5),
                                  "stages_s": {k: round(v, 5) for k, v in stages.items()}}
        stage_text = " ".join(f"{k[:-2]} {v * 1000:.0f}" for k, v in stages.items()
                              if k not in ("time_s", "comm_s"))
        print(f"  {model} b{batch_size} {px}px: step {step * 1000:.0f} ms, compute alone "
              f"{compute * 1000:.0f} ms, step/compute {step / compute:.2f}, step - compute "
              f"{(step - compute) * 1000:.0f} ms  [ms: {stage_text}]", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, quick="100 MB, 1 worker, fewer rounds")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--models", default=",".join(STEP_MODELS))
    ap.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1),
                    help="torch threads of the CPU worker and of the step alone "
                         "(default: the cores, at most 4)")
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--servers", type=int, default=None,
                    help="servers of the project's path (default: DEFAULT_LOOPBACK_SERVERS)")
    ap.add_argument("--bucket-mb", type=float, default=None,
                    help="bucket size (default: the worker's)")
    ap.add_argument("--compress", default="fp16", choices=("none", "fp16"),
                    help="steps only: the workers' gradient compression (default fp16, as "
                         "`sluice train`; push + pull always moves float32 bytes)")
    ap.add_argument("--sizes", default=None, help="push/pull sizes in MB, e.g. 100,500")
    ap.add_argument("--skip-push-pull", action="store_true")
    args = ap.parse_args(argv)

    import torch

    from ps_runtime.datapath import DEFAULT_LOOPBACK_SERVERS
    from ps_runtime.launcher import WorkerOptions

    servers = args.servers or DEFAULT_LOOPBACK_SERVERS
    choice = args.device
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(choice)
    sizes = [100] if args.quick else [10, 100, 500]
    if args.sizes:
        sizes = [float(x) if "." in x else int(x) for x in args.sizes.split(",")]
    worker_counts = [1] if args.quick else [1, 2]
    rounds = 3 if args.quick else 6
    bucket_mb = args.bucket_mb or WorkerOptions().bucket_mb
    report = {"device": device_name(device), "quick": args.quick,
              "servers": servers, "bucket_mb": bucket_mb, "compress": args.compress,
              "load_average": os.getloadavg(),
              "push_pull_gbytes_per_s": {}, "raw_kvstore_gbytes_per_s": {},
              "raw_kvstore_same_servers_gbytes_per_s": {},
              "project_over_tcp_gbytes_per_s": {}, "steps": {}}
    print(f"device: {report['device']}; load average {os.getloadavg()[0]:.2f}", flush=True)
    if not args.skip_push_pull:
        push_pull_table(report, sizes, worker_counts, servers, rounds, bucket_mb, args.quick)
    if not args.skip_steps:
        steps_table(report, [m for m in args.models.split(",") if m], device, choice, servers,
                    bucket_mb, args.compress, args.threads, args.quick)
    if args.json:
        harness.write_json(args.json, report)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--kv-worker":
        kv_worker(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        raise SystemExit(main())
