"""GPUs in Slurm's GRES strings, by type (pure).

Slurm writes a node's GPUs as ``gpu:4`` (untyped), ``gpu:a100:8`` (typed), both with
index or socket notes (``gpu:a100:2(IDX:0-1)``), in TRES form (``gres/gpu:a100=2``),
several types on one node (``gpu:a100:4,gpu:1g.5gb:7``). A MIG slice is a typed GRES
too: its type names the profile (``1g.5gb``, ``nvidia_a100_3g.20gb``). A slice is not a
GPU a PS worker can use like a whole one, so slices are counted apart and never summed
into a node's whole GPUs.
"""

from __future__ import annotations

import re

UNTYPED = ""
# MIG profiles: <compute slices>g.<memory>gb, optionally with a suffix (+me, _me, ...)
_MIG = re.compile(r"(?:^|[_\-.])\d+g\.\d+gb", re.IGNORECASE)


def is_mig(gpu_type: str) -> bool:
    """A MIG-like GPU type (``1g.5gb``, ``nvidia_a100_2g.10gb``)."""
    return bool(_MIG.search(gpu_type or ""))


def split_top(text: str) -> list[str]:
    """Split at commas outside brackets and parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p]


def gpus_by_type(text: str | None) -> dict[str, int]:
    """{type: count} of the GPUs in a GRES string (``""`` for untyped ones);
    ``gpu`` alone means one; other GRES (``nic:1``) and ``(null)`` count nothing."""
    out: dict[str, int] = {}
    for item in split_top((text or "").replace("gres/", "")):
        item = re.sub(r"\(.*?\)", "", item).strip().replace("=", ":")
        bits = item.split(":")
        if bits[0] != "gpu":
            continue
        if len(bits) == 1:
            kind, count = UNTYPED, 1
        elif bits[-1].isdigit():
            kind, count = (":".join(bits[1:-1]) or UNTYPED), int(bits[-1])
        else:
            kind, count = ":".join(bits[1:]), 1     # gpu:a100 = one a100
        out[kind] = out.get(kind, 0) + count
    return out


def whole_gpus(by_type: dict[str, int], gpu_type: str | None = None) -> int:
    """The GPUs a request for ``gpu_type`` (None: any whole GPU) can use: that type's
    count, or every type but MIG slices."""
    if gpu_type:
        return by_type.get(gpu_type, 0)
    return sum(k for t, k in by_type.items() if not is_mig(t))


def gres_gpus(text: str | None, gpu_type: str | None = None) -> int:
    """Whole GPUs in a GRES string: ``gpu:4`` -> 4, ``gpu:a100:2(S:0-1)`` -> 2,
    ``gpu:a100:2,gpu:1g.5gb:7`` -> 2 (the MIG slices apart), ``gres/gpu=3`` -> 3."""
    return whole_gpus(gpus_by_type(text), gpu_type)


def gres_request(count: int, gpu_type: str | None = None) -> str:
    """sbatch's ``--gres`` value for ``count`` GPUs, of ``gpu_type`` when given."""
    return f"gpu:{gpu_type}:{count}" if gpu_type else f"gpu:{count}"
