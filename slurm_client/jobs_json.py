"""``squeue --json`` of every release :mod:`slurm_client.versions` knows (pure): one
query that lists every job, the shape a batched poll needs. (The client's per-job
queries read ``squeue -o`` and ``scontrol show job -o``, whose text is the same in every
release; 22.05's ``squeue --json`` ignores ``-j``.)

Layouts (src/squeue/squeue.c and the data parsers' ``JOB_INFO`` at each release's tag):

- 22.05 (openapi/v0.0.38): ``{"meta", "errors", "jobs": [{job_id, job_state: "RUNNING",
  state_reason, het_job_id: 0 | id, het_job_offset, name, nodes: "h[1-2]", user_name,
  exit_code: <raw wait status>, account, partition, qos, time_limit, batch_host,
  restart_cnt}]}``;
- 23.02 (v0.0.39): the same keys; ``het_job_id``, ``het_job_offset``, ``exit_code`` and
  ``time_limit`` as ``{"set", "infinite", "number"}``;
- 23.11, 24.05, 24.11 (v0.0.40-42): ``{"jobs", "last_backfill", "last_update", "meta",
  ...}``; ``job_state`` a list (``["PENDING", "REQUEUED"]``: the state, then flags) and
  ``exit_code`` ``{"status": [...], "return_code": {...}, "signal": {"id": {...},
  "name"}}``.
"""

from __future__ import annotations

import json
from typing import Any

from slurm_client.nodes import ParseError
from slurm_client.parse import JobInfo, expand_hostlist
from slurm_client.versions import layout_for, version_from_meta


def _value(v: Any) -> int | None:
    """A count, or None where the data parser says it is not set."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _exit_code(v: Any) -> str | None:
    """``status:signal`` as ``scontrol`` prints it (``3:0``), from a raw wait status
    (22.05, 23.02) or 23.11's ``{return_code, signal: {id}}``."""
    if isinstance(v, dict) and "return_code" in v:
        signal = _value((v.get("signal") or {}).get("id")) or 0
        code = _value(v.get("return_code"))
        return None if code is None else f"{code}:{signal}"
    raw = _value(v)
    return None if raw is None else f"{(raw >> 8) & 0xFF}:{raw & 0x7F}"


def _job(j: dict) -> JobInfo:
    states = j.get("job_state")
    state = (states[0] if states else "") if isinstance(states, list) else (states or "")
    het = _value(j.get("het_job_id")) or None
    return JobInfo(job_id=int(j["job_id"]), state=str(state).upper(), name=j.get("name") or "",
                   reason=j.get("state_reason") or "",
                   nodes=tuple(expand_hostlist(j.get("nodes") or "")),
                   user=j.get("user_name") or "", het_job_id=het,
                   het_offset=_value(j.get("het_job_offset")) if het else None,
                   exit_code=_exit_code(j.get("exit_code")),
                   restarts=_value(j.get("restart_cnt")) or 0,
                   batch_host=j.get("batch_host") or "")


def parse_squeue_json(text: str) -> list[JobInfo]:
    """Every job of ``squeue --json`` (each part of a heterogeneous job), in the layout
    its ``meta`` names; ParseError for anything else, UnsupportedSlurm for a release
    sluice does not know."""
    try:
        data = json.loads(text)
        version = version_from_meta(data.get("meta"))
    except (ValueError, AttributeError) as err:
        raise ParseError(f"squeue --json: unexpected output ({err})")
    layout_for(version)
    jobs = data.get("jobs")
    if not isinstance(jobs, list):
        raise ParseError(f"squeue --json of Slurm {version}: no 'jobs' list")
    try:
        return [_job(j) for j in jobs]
    except (KeyError, TypeError, ValueError) as err:
        raise ParseError(f"squeue --json of Slurm {version}: unexpected record ({err!r})")
