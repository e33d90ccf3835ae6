"""Measure, on a real GPU, what Liquid's resource estimator learns from: per (model,
input size, batch size) the training step time and the peak GPU memory of one worker,
and per model the time to move its gradients off the device and back (the in-host
exchange a PS on the host's CPU needs, over the host bus).

Writes one JSON document (``--out``). Needs CUDA; run on the GPU machine:

    python -m bench.scheduler.measure_gpu_runs --out gpu_runs.json

The committed output is ``job_scheduler/core/data/measured_runs_h100.json``.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

from ps_runtime.models import build_model, input_shape

from bench import harness

MODELS = ("smallcnn", "resnet18", "alexnet", "vgg16", "googlenet")


def step(model, x, y, opt, loss_fn):
    opt.zero_grad(set_to_none=False)
    loss_fn(model(x), y).backward()
    opt.step()


def measure(name: str, size: int, b: int, dev, repeats: int) -> dict:
    torch.cuda.empty_cache()
    model = build_model(name, input_size=size).to(dev)
    shape = input_shape(name, size)
    with torch.no_grad():
        classes = model(torch.zeros(2, *shape, device=dev)).shape[1]
    x = torch.randn(b, *shape, device=dev)
    y = torch.randint(0, classes, (b,), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(3):
        step(model, x, y, opt, loss_fn)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(model, x, y, opt, loss_fn)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated()
    params = sum(p.numel() for p in model.parameters())
    # the in-host exchange: every gradient to pinned host memory and the parameters back
    grads = [p.grad for p in model.parameters()]
    host = [torch.empty(g.shape, dtype=g.dtype, pin_memory=True) for g in grads]
    xfer = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for g, h in zip(grads, host):
            h.copy_(g, non_blocking=True)
        for p, h in zip(model.parameters(), host):
            p.data.copy_(h, non_blocking=True)
        torch.cuda.synchronize()
        xfer.append(time.perf_counter() - t0)
    del model, opt, x, y, grads, host
    return {"model": name, "input_size": size, "batch_size": b, "params": params,
            "step_s": statistics.median(times), "peak_mem_bytes": int(peak),
            "exchange_s": statistics.median(xfer)}


def main() -> int:
    ap = harness.parser(__doc__, json_out=False)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="64,128,224")
    ap.add_argument("--batches", default="1,4,16,32,64,128,256")
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs CUDA", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    rows = []
    t_start = time.time()
    for name in MODELS:
        for size in [int(s) for s in args.sizes.split(",")]:
            if name == "smallcnn" and size != 64:
                continue               # fixed 28x28 input
            for b in [int(v) for v in args.batches.split(",")]:
                try:
                    r = measure(name, size, b, dev, args.repeats)
                except torch.cuda.OutOfMemoryError:
                    print(f"{name} {size}px b={b}: out of memory", flush=True)
                    continue
                rows.append(r)
                print(f"{name} {size}px b={b}: {r['step_s'] * 1e3:.1f} ms, "
                      f"{r['peak_mem_bytes'] / 2**20:.0f} MiB, exchange "
                      f"{r['exchange_s'] * 1e3:.1f} ms", flush=True)
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "python": platform.python_version(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": "python -m bench.scheduler.measure_gpu_runs " + " ".join(sys.argv[1:]),
           "wall_s": round(time.time() - t_start, 1), "runs": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
