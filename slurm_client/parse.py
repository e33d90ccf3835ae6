"""Pure parsers for the output of Slurm's commands (no I/O; unit-tested on recorded
output of the real 22.05 commands, tests/data/slurm/, and on each later release's
documented JSON, tests/data/slurm/versions/).

- ``sinfo --json``                -> :class:`NodeInfo` (:mod:`slurm_client.nodes`: every
                                     layout of :mod:`slurm_client.versions`)
- ``scontrol show job -o ID``     -> :class:`JobInfo` (a heterogeneous job: one line per part)
- ``squeue -h -t all -o FORMAT``  -> :class:`JobInfo` (``SQUEUE_FORMAT``)
- ``scontrol show topology``      -> :class:`SwitchInfo` (topology.conf's switches)
- ``sbatch --parsable``           -> the job id

Facts measured on 22.05.8 that the parsers rely on: ``squeue --json`` ignores ``-j`` and
gives the raw wait status, so the per-job queries use ``squeue -o`` / ``scontrol -o``;
GPU use per node is ``gres_used`` (``GresUsed`` with ``scontrol -d``), e.g. ``gpu:2`` or
``gpu:a100:2(IDX:0-1)``; a heterogeneous job's parts are ``ID+OFFSET`` in squeue and
separate ``JobId=`` lines with ``HetJobId=``/``HetJobOffset=`` in scontrol.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from slurm_client.gres import split_top
from slurm_client.nodes import ParseError
from slurm_client.site import SiteOptions

# Job states of a job that is over (Slurm's names).
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                      "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT",
                      "REVOKED"})
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED",
                    "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SIGNALING",
                    "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})
# squeue -o: id|state|reason|nodes|user|name (name last: it may hold anything)
SQUEUE_FORMAT = "%i|%T|%r|%N|%u|%j"


@dataclass(frozen=True)
class JobInfo:
    job_id: int                     # this part's own id
    state: str                      # RUNNING, COMPLETED, NODE_FAIL ...
    name: str = ""
    reason: str = ""
    nodes: tuple[str, ...] = ()
    user: str = ""
    het_job_id: int | None = None   # the heterogeneous job's leader id (= job_id of part 0)
    het_offset: int | None = None
    exit_code: str | None = None    # "3:0" (status:signal), scontrol only
    restarts: int = 0
    batch_host: str = ""
    account: str = ""               # sacct only (the account Slurm charged)

    @property
    def leader(self) -> int:
        return self.het_job_id or self.job_id

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


@dataclass(frozen=True)
class SwitchInfo:
    name: str
    level: int
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_speed: str = ""


# ---- small pieces ----------------------------------------------------------------------

def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list syntax: ``h[1-3,7],tor1,n[01-02]`` -> names (``(null)``/empty: none)."""
    text = (text or "").strip()
    if not text or text in ("(null)", "None", "N/A"):
        return []
    out: list[str] = []
    for part in split_top(text):
        m = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\](.*)", part)
        if not m:
            if "[" in part or "]" in part:
                raise ParseError(f"bad host list {text!r}")
            out.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        tails = expand_hostlist(suffix) if "[" in suffix else [suffix]
        for rng in ranges.split(","):
            lo, sep, hi = rng.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()):
                raise ParseError(f"bad host list range {rng!r} in {text!r}")
            width = len(lo)
            for k in range(int(lo), int(hi if sep else lo) + 1):
                out.extend(f"{prefix}{k:0{width}d}{t}" for t in tails)
    return out


_KV = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_kv_line(line: str) -> dict[str, str]:
    """One ``scontrol show ... -o`` record: ``Key=Value`` pairs; a value may contain
    spaces (``Reason=disk check [root@...]``, ``OS=Linux 6.1 #1 SMP``): it runs up to
    the next `` Key=``."""
    line = line.strip()
    marks = list(_KV.finditer(line))
    if not marks:
        raise ParseError(f"not a key=value record: {line[:80]!r}")
    out = {}
    for m, nxt in zip(marks, marks[1:] + [None]):
        end = nxt.start() if nxt is not None else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    return out


def _int(text: str | None, default: int = 0) -> int:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return default


# ---- jobs ------------------------------------------------------------------------------

def parse_scontrol_jobs(text: str) -> list[JobInfo]:
    """``scontrol show job -o ID``: one line per job (per part of a heterogeneous job)."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        kv = parse_kv_line(line)
        if "JobId" not in kv:
            raise ParseError(f"scontrol show job: no JobId in {line[:80]!r}")
        het = kv.get("HetJobId")
        out.append(JobInfo(job_id=_int(kv["JobId"]), state=kv.get("JobState", "").upper(),
                           name=kv.get("JobName", ""), reason=kv.get("Reason", ""),
                           nodes=tuple(expand_hostlist(kv.get("NodeList", ""))),
                           user=kv.get("UserId", "").split("(")[0],
                           het_job_id=_int(het) if het else None,
                           het_offset=_int(kv.get("HetJobOffset")) if het else None,
                           exit_code=kv.get("ExitCode"), restarts=_int(kv.get("Restarts")),
                           batch_host=kv.get("BatchHost", "")))
    return out


def parse_squeue_lines(text: str) -> list[JobInfo]:
    """``squeue -h -t all -o SQUEUE_FORMAT``: ``10+1|RUNNING|None|n2|root|name``."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        bits = line.split("|", 5)
        if len(bits) != 6:
            raise ParseError(f"squeue: unexpected line {line[:80]!r}")
        jid, state, reason, nodes, user, name = bits
        leader, plus, offset = jid.partition("+")
        if not leader.isdigit():
            raise ParseError(f"squeue: bad job id {jid!r}")
        out.append(JobInfo(job_id=int(leader) + (int(offset) if plus else 0),
                           state=state.upper(), name=name, reason=reason,
                           nodes=tuple(expand_hostlist(nodes)), user=user,
                           het_job_id=int(leader) if plus else None,
                           het_offset=int(offset) if plus else None))
    return out


def job_outcome(parts: list[JobInfo]) -> tuple[str, str]:
    """A (heterogeneous) job's state from its parts: ('active'|'completed'|'failed',
    Slurm's words). Any failed part fails the job; it is over only when every part is."""
    if not parts:
        raise ValueError("no parts")
    bad = [p for p in parts if p.terminal and p.state != "COMPLETED"]
    if all(p.terminal for p in parts) or bad:
        if not bad:
            return "completed", "COMPLETED"
        p = bad[0]
        words = p.state
        if p.reason and p.reason not in ("None", "(null)"):
            words += f", reason {p.reason}"
        if p.exit_code and p.exit_code != "0:0":
            words += f", exit code {p.exit_code}"
        if p.nodes:
            words += f", nodes {','.join(p.nodes)}"
        return ("failed" if all(q.terminal for q in parts) else "failing"), words
    return "active", ",".join(sorted({p.state for p in parts}))


def parse_sbatch_parsable(text: str) -> int:
    """``sbatch --parsable``: ``ID`` or ``ID;CLUSTER``."""
    first = text.strip().splitlines()[-1] if text.strip() else ""
    jid = first.split(";")[0].strip()
    if not jid.isdigit():
        raise ParseError(f"sbatch --parsable printed {text.strip()[:80]!r}, not a job id")
    return int(jid)


# ---- topology --------------------------------------------------------------------------

def parse_topology(text: str) -> list[SwitchInfo]:
    """``scontrol show topology``: ``SwitchName=rack1 Level=0 LinkSpeed=1 Nodes=n1``."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        kv = parse_kv_line(line)
        if "SwitchName" not in kv:
            raise ParseError(f"scontrol show topology: no SwitchName in {line[:80]!r}")
        out.append(SwitchInfo(name=kv["SwitchName"], level=_int(kv.get("Level")),
                              nodes=tuple(expand_hostlist(kv.get("Nodes", ""))),
                              switches=tuple(expand_hostlist(kv.get("Switches", ""))),
                              link_speed=kv.get("LinkSpeed", "")))
    return out


@dataclass(frozen=True)
class Component:
    """One part of a heterogeneous job: one node, its tasks and GPUs."""
    node: str
    gpus: int
    tasks: int = 1


@dataclass(frozen=True)
class Submission:
    name: str
    components: tuple[Component, ...]
    script: str                     # path of the batch script
    output: str                     # the batch script's stdout/stderr file
    partition: str | None = None    # (site.partition, when given, is the same thing)
    extra: tuple[str, ...] = field(default=())     # flags for the whole job, before part 0
    site: SiteOptions = SiteOptions()   # account, QOS, time, GPU type, ... of every part


def sbatch_argv(sub: Submission) -> list[str]:
    """``sbatch --parsable`` for a heterogeneous job, one component per node (``:``
    between them). 22.05 excludes each component's nodes from the others (``ExcNodeList``),
    so a node appears in one component only. ``--no-requeue``: the client decides retries
    (a job Slurm requeued itself after a node failure waits ~121 s and keeps its nodelist).
    Every component carries the site's flags (:meth:`SiteOptions.component_flags`)."""
    if not sub.components:
        raise ValueError("a submission needs at least one component")
    nodes = [c.node for c in sub.components]
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"one component per node, got {nodes}")
    site = replace(sub.site, partition=sub.partition) if sub.partition else sub.site
    argv = ["sbatch", "--parsable", f"--job-name={sub.name}", f"--output={sub.output}",
            *sub.extra]
    for k, c in enumerate(sub.components):
        if k:
            argv.append(":")
        argv += [f"--nodelist={c.node}", "--nodes=1", f"--ntasks={max(1, c.tasks)}",
                 "--no-requeue", *site.component_flags(c.gpus)]
    return argv + [sub.script]
