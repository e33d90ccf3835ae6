"""The admin-token rule both services share: one minimum length, one wording.

``sluice scheduler`` (SLUICE_SCHEDULER_TOKEN or --token; optional on a loopback address)
and ``sluice controller`` (SLUICE_ADMIN_TOKEN or --admin-token; always required) refuse
a token shorter than :data:`MIN_ADMIN_TOKEN_CHARS` at start, with exit status 2 and this
module's message naming the environment variable. ``python -c "import secrets;
print(secrets.token_urlsafe(24))"`` makes a good one.
"""

from __future__ import annotations

from sluice_common.errors import InputError

MIN_ADMIN_TOKEN_CHARS = 16


def check_admin_token(token: str | None, env: str, option: str, required: bool) -> str | None:
    """The admin token to use (None: none, when not ``required``); InputError naming
    ``env`` when it is missing but required, or shorter than the minimum."""
    if not token:
        if required:
            raise InputError(env, f"an admin token is required: set {env} (or {option}) to "
                             f"at least {MIN_ADMIN_TOKEN_CHARS} characters")
        return None
    if len(token) < MIN_ADMIN_TOKEN_CHARS:
        raise InputError(env, f"the admin token must be at least {MIN_ADMIN_TOKEN_CHARS} "
                         f"characters, got {len(token)}: set {env} (or {option}) to a longer "
                         "one")
    return token
