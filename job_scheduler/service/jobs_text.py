"""``sluice jobs`` as text: the table (one line per job) and one job whole
(``sluice jobs ID``). Pure: the jobs as the API answers them in, lines out."""

from __future__ import annotations

import time


def placement_text(placement: dict | None) -> str:
    if not placement:
        return "-"
    ids = placement.get("gpu_ids") or {}       # h1:2 GPUs, as h1:2[0,1] with their indices
    gpus = ",".join(f"{h}:{n}" + (f"[{','.join(map(str, ids[h]))}]" if h in ids else "")
                    for h, n in sorted(placement.get("gpus_by_host", {}).items()))
    return f"{gpus} ps={','.join(placement.get('ps_hosts', []))}"


def _clock(t: float | None, local=time.localtime) -> str:
    return "-" if t is None else time.strftime("%H:%M:%S", local(t))


def _in(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    return f"{_clock(t)} (+{max(t - now, 0):.0f}s)"


def reason_code(job: dict) -> str:
    r = job.get("reason")
    if isinstance(r, dict):
        return str(r.get("code", "-"))
    return "-"


def table(jobs: list[dict], now: float) -> list[str]:
    """ID, NAME, STATE, GPUS, REASON (a waiting job's code), EST. START (a queued
    job's estimated start; a running one's estimated end, as ``end HH:MM:SS``), then
    the placement, or how a job ended."""
    out = [f"{'ID':>5}  {'NAME':<20} {'STATE':<10} {'GPUS':>4}  {'REASON':<9} "
           f"{'EST. START':<17} {'POS':>4}  PLACEMENT / DETAIL"]
    for j in jobs:
        extra = placement_text(j.get("placement"))
        if j.get("external_id") is not None:     # e.g. slurm=1234: the Slurm job id
            extra += f" {j.get('executor')}={j['external_id']}"
        if j.get("user"):
            extra += f" user={j['user']}"
        reason = j.get("reason")
        if isinstance(reason, str) and reason:   # how an ended job ended
            extra += f"  ({reason})"
        if j["state"] == "queued":
            est = _in(j.get("estimated_start"), now)
            not_before = j.get("not_before")
            if not_before is not None and not_before > now:
                extra = f"arrives {_clock(not_before)} (in {not_before - now:.0f} s)"
        elif j["state"] == "running" and j.get("estimated_end") is not None:
            est = f"end {_clock(j['estimated_end'])}"
        else:
            est = "-"
        pos = "-" if j.get("position") is None else str(j["position"])
        gpus = "-" if j.get("gpus") is None else j["gpus"]
        out.append(f"{j['id']:>5}  {j['name'][:20]:<20} {j['state']:<10} {gpus:>4}  "
                   f"{reason_code(j):<9} {est:<17} {pos:>4}  {extra}")
    return out


def one_job(job: dict, now: float) -> list[str]:
    """One job whole: state, why it waits (code and sentence), its place and
    estimates, placement, its registration at the fabric controller and every event."""
    def ts(t):
        return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))

    out = [f"job {job['id']} ({job['name']}): {job['state']}"
           + (f", user {job['user']}" if job.get("user") else "")]
    out.append(f"  model {job.get('model', '-')}, max_gpus {job.get('max_gpus', '-')}, "
               f"attempts {job.get('attempts', 0)}, submission {job.get('submission', '-')}")
    reason = job.get("reason")
    if isinstance(reason, dict):
        out.append(f"  reason: {reason.get('code')}: {reason.get('message')}")
    elif reason:
        out.append(f"  reason: {reason}")
    if job.get("position") is not None:
        out.append(f"  position: {job['position']} in the policy's order")
    if job["state"] == "queued":
        start = job.get("estimated_start")
        out.append("  estimated start: " + (f"{ts(start)} (in {max(start - now, 0):.0f} s)"
                                            if start is not None else "not within the forecast"))
    out.append(f"  submitted {ts(job.get('submitted_at'))}, started {ts(job.get('started_at'))}, "
               f"finished {ts(job.get('finished_at'))}")
    if job.get("estimated_end") is not None:
        out.append(f"  estimated end: {ts(job['estimated_end'])} "
                   f"(in {max(job['estimated_end'] - now, 0):.0f} s)")
    out.append(f"  placement: {placement_text(job.get('placement'))}"
               + (f" on {job['gpus']} GPUs" if job.get("gpus") else ""))
    if job.get("executor"):
        out.append(f"  executor: {job['executor']}"
                   + (f" (id {job['external_id']})" if job.get("external_id") else "")
                   + (f", exit code {job['exit_code']}" if job.get("exit_code") is not None
                      else ""))
    events = job.get("events") or []
    out.append("  controller: " + controller_text(job, events, ts))
    out.append(f"  events ({len(events)}):")
    for e in events:
        out.append(f"    {ts(e.get('at'))}  {e.get('kind'):<12} {e.get('detail') or ''}".rstrip())
    return out


def controller_text(job: dict, events: list[dict], ts) -> str:
    """The job's registration at the fabric controller: the service's ``controller``
    view where it gives one (state, identity, last error, attempts), else what its
    ``controller*`` events recorded."""
    reg = job.get("controller")
    if isinstance(reg, dict):
        text = f"{reg.get('state')}" + (f" as {reg['id']}" if reg.get("id") else "")
        if reg.get("error"):
            text += f", last error: {reg['error']}"
        if reg.get("attempts"):
            text += f" ({reg['attempts']} attempt{'s' if reg['attempts'] != 1 else ''})"
        return text
    said = [e for e in events if str(e.get("kind", "")).startswith("controller")]
    if said:
        last = said[-1]
        return f"{last.get('kind')} at {ts(last.get('at'))}: {last.get('detail') or ''}".rstrip()
    if job.get("started_at"):
        return "none (the service has no controller)"
    return "not registered (not started)"
