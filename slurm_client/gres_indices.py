"""Which GPU indices Slurm gave each running job: its GRES detail, parsed (pure).

``scontrol -d show job -o`` prints, per job (each component of a heterogeneous job is a
line of its own, with ``HetJobId``), one detail group per node set it runs on:

    JobId=4 HetJobId=3 ... JobState=RUNNING ... JOB_GRES=gpu:2   Nodes=h3 CPU_IDs=0-1 Mem=0 GRES=gpu:2(IDX:0-1) MinCPUsNode=1 ...

(measured on Slurm 22.05 with ``gres.conf`` ``File=`` device files). The node's own
``GresUsed`` says only how many (``gpu:3``), so the per-job detail is the truth for
which GPUs are taken, other users' jobs included. Kept apart from
:mod:`slurm_client.parse` on purpose: one job, one module.
"""

from __future__ import annotations

import re
from typing import Mapping

from slurm_client.parse import expand_hostlist

_DETAIL = re.compile(r"(?:^|\s)Nodes=(\S+)(.*?)(?=\sNodes=|$)")
_GRES = re.compile(r"(?:^|\s)GRES=(\S*)")
_FIELD = re.compile(r"(?:^|\s)(JobId|HetJobId|JobState|UserId)=(\S*)")
HOLDING = ("RUNNING", "COMPLETING", "SUSPENDED", "STOPPED")


def gres_gpu_indices(text: str | None) -> list[int]:
    """GPU indices of a GRES string: ``gpu:2(IDX:0-1)``, ``gpu:a100:3(IDX:0,2-3)``,
    ``gpu:1(IDX:0),nic:1``; [] for ``gpu:0(IDX:N/A)``, a count without indices, none."""
    out: list[int] = []
    # items split at the commas outside parentheses: gpu:2(IDX:0,2),nic:1
    for item in re.findall(r"[^,(]+(?:\([^)]*\))?", text or ""):
        name, _, rest = item.strip().partition(":")
        m = re.search(r"\(IDX:([^)]*)\)", rest)
        if name != "gpu" or not m or m.group(1) in ("N/A", ""):
            continue
        for part in m.group(1).split(","):
            lo, _, hi = part.partition("-")
            out.extend(range(int(lo), int(hi or lo) + 1))
    return sorted(set(out))


def parse_job_gpu_indices(text: str) -> dict[int, dict[str, list[int]]]:
    """``scontrol -d show job -o`` -> ``{job id: {node: [GPU index, ...]}}`` for the jobs
    that hold their GPUs now (running, completing, suspended); a heterogeneous job's
    components are merged under its ``HetJobId`` (the id sbatch returned)."""
    out: dict[int, dict[str, list[int]]] = {}
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "JobId" not in fields or fields.get("JobState") not in HOLDING:
            continue
        het = fields.get("HetJobId", "")
        job = int(het) if het.isdigit() else int(fields["JobId"])
        for nodes, rest in _DETAIL.findall(line):
            g = _GRES.search(rest)
            ids = gres_gpu_indices(g.group(1) if g else "")
            for node in expand_hostlist(nodes) if ids else ():
                merged = set(out.setdefault(job, {}).get(node, [])) | set(ids)
                out[job][node] = sorted(merged)
    return out


def foreign_gpu_indices(truth: Mapping[int, Mapping[str, list[int]]],
                        own: set[int]) -> dict[str, list[int]]:
    """``{node: [index, ...]}`` Slurm jobs other than ``own`` (sluice's) hold."""
    out: dict[str, set[int]] = {}
    for job, nodes in truth.items():
        if job not in own:
            for node, ids in nodes.items():
                out.setdefault(node, set()).update(ids)
    return {n: sorted(v) for n, v in sorted(out.items())}
