"""Who submitted a job: the API token -> Unix user map (``sluice scheduler --users FILE``).

A site gives each user a token of their own; a submission made with it is recorded with
that Unix user, and under ``--executor slurm`` it runs and is accounted as that user
(``sbatch --uid/--gid`` by the service, which runs as root: Slurm 22.05 lets only root
submit for another user). The admin token still submits, as the service's own account.
The file (YAML, readable by the service only: it holds secrets)::

    users:
      - {name: sluice-alice, token: "a-long-random-token-for-alice"}
      - {name: sluice-bob, token: "another-long-random-token"}

Each name must be a Unix user of this machine (and, with Slurm, of every node: the same
uid); tokens are at least :data:`MIN_ADMIN_TOKEN_CHARS` characters and unique. Bad input
names the file, the entry and the field (exit 2), nothing started.
"""

from __future__ import annotations

import grp
import hmac
import pwd
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from sluice_common.errors import InputError
from sluice_common.tokens import MIN_ADMIN_TOKEN_CHARS


@dataclass(frozen=True)
class UnixUser:
    name: str
    uid: int
    gid: int
    group: str
    home: str

    @classmethod
    def of(cls, name: str) -> "UnixUser":
        """KeyError when the machine has no such user."""
        pw = pwd.getpwnam(name)
        try:
            group = grp.getgrgid(pw.pw_gid).gr_name
        except KeyError:
            group = str(pw.pw_gid)
        return cls(name, pw.pw_uid, pw.pw_gid, group, pw.pw_dir)


def parse_users(data, source: str) -> dict[str, str]:
    """``{token: user}`` from the file's YAML data (pure but for the user look-up)."""
    if not isinstance(data, dict) or not isinstance(data.get("users"), list):
        raise InputError(source, "must be a mapping with a list 'users' of {name, token}",
                         field="users")
    out: dict[str, str] = {}
    for k, entry in enumerate(data["users"]):
        where = f"users[{k}]"
        if not isinstance(entry, dict) or set(entry) != {"name", "token"}:
            raise InputError(source, "each entry is {name: UNIX_USER, token: TOKEN}",
                             element=where)
        name, token = entry["name"], entry["token"]
        if not isinstance(name, str) or not name:
            raise InputError(source, "must be a Unix user name", element=where, field="name")
        try:
            user = UnixUser.of(name)
        except KeyError:
            raise InputError(source, f"no Unix user {name!r} on this machine", element=where,
                             field="name")
        if user.uid == 0:
            raise InputError(source, "root is not a user jobs may run as", element=where,
                             field="name")
        if not isinstance(token, str) or len(token) < MIN_ADMIN_TOKEN_CHARS:
            raise InputError(source, f"must be a string of at least {MIN_ADMIN_TOKEN_CHARS} "
                             "characters", element=where, field="token")
        if token in out:
            raise InputError(source, f"the same token as user {out[token]!r}", element=where,
                             field="token")
        out[token] = name
    return out


def load_users(path: str | Path | None) -> dict[str, str]:
    if path is None:
        return {}
    from job_scheduler.service.yaml_input import read_yaml

    return parse_users(read_yaml(path), str(path))


def user_of(token: str | None, users: Mapping[str, str]) -> str | None:
    """The user whose token this is (compared in constant time), or None."""
    if not token:
        return None
    found = None
    for known, name in users.items():
        if hmac.compare_digest(token.encode(), known.encode()):
            found = name
    return found


ADMIN_TOKEN = "the scheduler's admin token"
ADMIN_TOKEN_HOW = "sluice submit/cancel: --token or SLUICE_SCHEDULER_TOKEN"


def admin_refusal(token: str | None, admin_token: str | None, users: Mapping[str, str]
                  ) -> tuple[int, str, dict[str, str]] | None:
    """Why a request that needs the admin token is refused - (status, reason, headers) -
    or None when it may go on (no admin token configured, or this one). A user's own
    token is a valid one without that right (403); no token or an unknown one is 401,
    each with its own reason."""
    from sluice_common.tokens import token_refusal, www_authenticate

    if not admin_token or (token and hmac.compare_digest(token.encode(), admin_token.encode())):
        return None
    user = user_of(token, users)
    if user is not None:
        return 403, (f"the token given is user {user}'s, which may submit jobs; this needs "
                     f"{ADMIN_TOKEN}"), {}
    wanted = ADMIN_TOKEN + (" nor a user's token (--users)" if users else "")
    return 401, token_refusal(token, wanted, ADMIN_TOKEN_HOW), {
        "WWW-Authenticate": www_authenticate("sluice-scheduler", token)}
