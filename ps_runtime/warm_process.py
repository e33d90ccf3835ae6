"""The process side of a warm PS process (``ps_runtime.warm``'s pool, and the children
of ``ps_runtime.zygote``'s fork server): import at the lowest priority, say ``ready``,
take one command, become it. The runner's side is ``ps_runtime.warm.WarmRunner``."""

from __future__ import annotations

import json
import os
import sys
from typing import Mapping


def check_gpu_binding(env: Mapping[str, str]) -> None:
    """A worker's GPU (``CUDA_VISIBLE_DEVICES``) binds only if CUDA is not initialised
    in this process yet (the driver reads the variable once): the pool imports MXNet, a
    CPU build, and never torch's CUDA; a preload that did is refused here, loudly,
    rather than letting the worker run on whatever GPU it already has."""
    from ps_runtime.gpu_binding import GPU_ENV

    torch = sys.modules.get("torch")
    if GPU_ENV in env and torch is not None and torch.cuda.is_initialized():
        raise SystemExit(f"warm process: CUDA was initialised before its {GPU_ENV}="
                         f"{env[GPU_ENV]!r} arrived (a preload touched the GPU); "
                         "start this worker cold")


def import_preloads(preload) -> None:
    """Import ``preload`` (module names; ``mxnet`` through the numpy 2 shim) at the lowest
    CPU priority: a pool refilled while jobs run must take only the CPU they leave (their
    timing is what the run measures)."""
    import importlib

    os.setpriority(os.PRIO_PROCESS, 0, 19)
    for name in preload:
        if name == "mxnet":                      # numpy 2 needs the names MXNet reads first
            from ps_runtime.numpy_compat import import_mxnet

            import_mxnet()
        else:
            importlib.import_module(name)


def serve_one() -> int:
    """Say ``ready`` on stdout, wait for one command on stdin, become it (its module run
    as ``python -m`` would); 0 at once when stdin closes first (the pool was closed)."""
    import runpy

    try:
        os.write(1, b"ready\n")
    except OSError:
        pass                                     # handed over before ready: nobody listens
    line = sys.stdin.readline()
    if not line.strip():
        return 0                                 # the pool was closed
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)    # back to normal (needs root, as the fabric does)
    except OSError:
        pass
    cmd = json.loads(line)
    fd = os.open(cmd["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    check_gpu_binding(cmd["env"])
    os.environ.update(cmd["env"])
    sys.argv = [cmd["module"], *cmd["args"]]
    runpy.run_module(cmd["module"], run_name="__main__", alter_sys=True)
    return 0
