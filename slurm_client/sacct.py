"""``sacct``: Slurm's accounting (slurmdbd), the record of jobs slurmctld has forgotten
(``MinJobAge``). Pure parsing here; :meth:`slurm_client.client.SlurmClient.accounted`
runs the command.

``sacct -n -P -X -a -D --jobs=ID,... --format=SACCT_FORMAT``: one line per allocation
(``-X``: no step lines), every user's (``-a``), parts of a heterogeneous job as
``ID+OFFSET`` (as squeue), ``|`` between fields, the name last (it may hold anything).
``-D`` (duplicates) because a job id may have been used twice (a slurmctld cold start
restarts the count): the newest record of an id is the one kept. A state may carry
words (``CANCELLED by 0``): the first word is the state.
"""

from __future__ import annotations

from slurm_client.nodes import ParseError
from slurm_client.parse import JobInfo, expand_hostlist

SACCT_FORMAT = "JobID,State,ExitCode,NodeList,User,Account,Submit,JobName"


def sacct_argv(ids) -> list[str]:
    return ["sacct", "--noheader", "--parsable2", "--allocations", "--allusers", "--duplicates",
            "--jobs=" + ",".join(map(str, sorted(set(ids)))), f"--format={SACCT_FORMAT}"]


def parse_sacct_lines(text: str) -> list[JobInfo]:
    """One :class:`JobInfo` per allocation (with ``exit_code`` and ``account``); of two
    records of one id, the one submitted last."""
    newest: dict[int, tuple[str, JobInfo]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        bits = line.split("|", 7)
        if len(bits) != 8:
            raise ParseError(f"sacct: unexpected line {line[:80]!r}")
        jid, state, exit_code, nodes, user, account, submit, name = bits
        leader, plus, offset = jid.partition("+")
        if not leader.isdigit() or (plus and not offset.isdigit()):
            raise ParseError(f"sacct: bad job id {jid!r}")
        info = JobInfo(job_id=int(leader) + (int(offset) if plus else 0),
                       state=(state.split() or ["UNKNOWN"])[0].upper(), name=name,
                       nodes=tuple(expand_hostlist(nodes)), user=user,
                       het_job_id=int(leader) if plus else None,
                       het_offset=int(offset) if plus else None,
                       exit_code=exit_code or None, account=account)
        if info.job_id not in newest or submit >= newest[info.job_id][0]:
            newest[info.job_id] = (submit, info)
    return [info for _, info in sorted(newest.values(), key=lambda t: t[1].job_id)]
