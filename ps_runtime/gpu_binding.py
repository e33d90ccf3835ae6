"""Each worker on its own GPU: the binding the launcher hands a worker process, and the
record the process writes of the GPU it really ran on.

The scheduler names the GPU indices of each host a job holds
(:class:`sluice_common.placement.GpuGrant`); the launcher gives the k-th worker on a host
the host's k-th index as ``CUDA_VISIBLE_DEVICES`` (``ps_runtime.plan.Node.gpu``), and PS
processes (ps-lite scheduler, servers: CPU only) an empty one. The CUDA driver reads the
variable once, when the process first initialises CUDA, so it must be in the process's
environment before that: a cold process gets it at exec; a pre-started one
(``ps_runtime.warm``) has imported MXNet (a CPU build: no CUDA) but not torch, and sets
its environment from the command it is handed before it runs the worker module, which
imports torch only then (``warm.main`` refuses a binding if CUDA were already
initialised). Under Slurm, Slurm's own GRES binding sets the variable of a step.

Each worker records, beside its host, the GPU it ran on (``SLUICE_RAN_ON``: a JSON file;
under Slurm the step's ran-on record, merged): the index on its host (the visible one),
the device torch used, and on a real GPU the device's UUID. ``gpus_by_host`` turns a
job's records into ``{host: [index, ...]}`` (what ``sluice demo``'s ``gpu_records``
report), from the processes, not from the decision.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

GPU_ENV = "CUDA_VISIBLE_DEVICES"
RAN_ON_ENV = "SLUICE_RAN_ON"        # the file a worker records where it ran
HOST_ENV = "SLUICE_HOST"            # the host name the launcher started it on


def worker_env(gpu: int | None, host: str, record: str | Path) -> dict[str, str]:
    """A worker's share of its environment: its GPU (none named: left as it is, e.g.
    Slurm's) and where it records what it ran on."""
    env = {HOST_ENV: host, RAN_ON_ENV: str(record)}
    if gpu is not None:
        env[GPU_ENV] = str(int(gpu))
    return env


def visible_gpu(env=None) -> int | None:
    """The host GPU index this process may use: under Slurm the step's GRES index
    (``SLURM_STEP_GPUS``: the node's numbering, also where cgroups renumber
    ``CUDA_VISIBLE_DEVICES`` from 0), else the first entry of ``CUDA_VISIBLE_DEVICES``
    when it is an index (None: unset, empty, or a UUID)."""
    env = os.environ if env is None else env
    for name in ("SLURM_STEP_GPUS", GPU_ENV):
        value = env.get(name, "").split(",")[0].strip()
        if value.isdigit():
            return int(value)
    return None


def device_uuid(device) -> str | None:
    """The UUID of the CUDA device torch uses (``GPU-...``, as nvidia-smi prints it);
    None on the CPU."""
    if getattr(device, "type", str(device)) != "cuda":
        return None
    import torch

    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    return f"GPU-{uuid}" if uuid is not None else None


def record_worker(rank: int, compute: str, device: str, uuid: str | None = None) -> dict | None:
    """Write (merge into) this worker's ran-on record; None when no record was asked
    for (a process started by hand)."""
    path = os.environ.get(RAN_ON_ENV)
    if not path:
        return None
    facts = {"role": "worker", "rank": rank, "host": os.environ.get(HOST_ENV, ""),
             "gpu": visible_gpu(), GPU_ENV: os.environ.get(GPU_ENV),
             "compute": compute, "device": device, "uuid": uuid, "pid": os.getpid(),
             "at": time.time()}
    target = Path(path)
    try:
        old = json.loads(target.read_text())
    except (OSError, ValueError):
        old = {}
    record = {**old, **facts}
    if old.get("intended_host") and not facts["host"]:     # Slurm's record names it
        record["host"] = old["intended_host"]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, target)
    return record


def read_records(directory: str | Path) -> list[dict]:
    """The workers' ran-on records of one job run (torn or foreign files skipped)."""
    out = []
    for path in sorted(Path(directory).glob("worker*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("role") == "worker":
            out.append(rec)
    return out


def gpus_by_host(records) -> dict[str, list[int]]:
    """``{host: [GPU index, ...]}`` the workers recorded (a worker without an index,
    e.g. on a machine with no binding, is left out)."""
    out: dict[str, list[int]] = {}
    for rec in records:
        if rec.get("gpu") is not None and rec.get("host"):
            out.setdefault(rec["host"], []).append(int(rec["gpu"]))
    return {h: sorted(v) for h, v in sorted(out.items())}


def ran_on_entry(start_s: float, end_s: float, directory: str | Path, decided=None) -> dict:
    """One run of a job (start to end, seconds) with the GPUs its workers recorded, and
    beside them the decision's (``decided``, a GpuGrant): an entry of ``sluice run``'s
    per-job ``gpu_runs``."""
    return {"start_s": round(start_s, 3), "end_s": round(end_s, 3),
            "gpus": gpus_by_host(read_records(directory)),
            **({"decided": decided.as_dict()} if decided is not None else {})}
