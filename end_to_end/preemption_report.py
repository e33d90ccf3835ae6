"""The report's section on suspensions (``sluice run --policy las`` / ``--migrate``)."""

from __future__ import annotations


def _f(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def preemption_lines(result: dict) -> list[str]:
    rows = result.get("preemptions") or []
    s = result["summary"]
    lines = ["", "## Preemptions and migrations (suspend/resume at a batch boundary)", "",
             f"{s.get('preemptions', 0)} preemption(s), {s.get('migrations', 0)} migration(s). "
             "suspend s: from the request until every process had exited with the checkpoint "
             "written; resume s: from the resumed job's launch until every worker finished "
             "its first batch.", ""]
    if "time_slices" in s:          # sluice run --time-slice/--pack (job_scheduler.core.mechanisms)
        lines += [f"{s['time_slices']} time slice(s); resumed on more GPUs {s['grows']} time(s), "
                  f"on fewer {s['shrinks']} time(s); {s['packed']} job(s) packed onto a busy "
                  "GPU.", ""]
        lines += [f"- {p['t']:.1f} s: {p['job']} packed onto the GPU of {p['with']} on "
                  f"{p['host']}" for p in result.get("packings", [])]
    if not rows:
        return lines + ["None happened."]
    lines += ["| t s | job | why | after batch | suspend s | resume s | interruption s | from | to | GPUs |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for p in rows:
        gpus = f"{p['gpus']} -> {p['resume_gpus']}" if "resume_gpus" in p else "-"
        lines.append(f"| {p['t']:.1f} | {p['job']} | {p['why']} | {p['batch']}/{p['batches']} | "
                     f"{_f(p.get('suspend_s'))} | {_f(p.get('resume_s'))} | "
                     f"{_f(p.get('interruption_s'))} | {','.join(p.get('from_hosts', []))} | "
                     f"{','.join(p.get('to_hosts', [])) or '-'} | {gpus} |")
    return lines
