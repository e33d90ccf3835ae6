"""The admin-token rule both services share: one minimum length, one wording.

``sluice scheduler`` (SLUICE_SCHEDULER_TOKEN or --token; optional on a loopback address)
and ``sluice controller`` (SLUICE_ADMIN_TOKEN or --admin-token; always required) refuse
a token shorter than :data:`MIN_ADMIN_TOKEN_CHARS` at start, with exit status 2 and this
module's message naming the environment variable. ``python -c "import secrets;
print(secrets.token_urlsafe(24))"`` makes a good one.

The wording of a refusal is shared too: a request without a token and one with a wrong
token are told apart (:func:`token_refusal`), and a service started without an admin
token says who can then act on it (:func:`no_admin_token_warning`).
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


# ---- refusals: a missing token and a wrong one are told apart ------------------------------
# Both are 401 (RFC 6750: a request without credentials, and one with an invalid token,
# 3.1 "invalid_token"); a valid token without the right to do it is 403. The reasons never
# contain a token.

def no_token(wanted: str, how: str) -> str:
    """Why a request that carried no token is refused: ``wanted`` names the token
    (``the scheduler's admin token``), ``how`` where a client finds it."""
    return f"no token given: send Authorization: Bearer <token> with {wanted} ({how})"


def wrong_token(wanted: str) -> str:
    """Why a request whose token is not ``wanted`` is refused."""
    return f"the token given is not {wanted}"


def token_refusal(token: str | None, wanted: str, how: str) -> str:
    """The reason of a 401: no token, or one that is not ``wanted``."""
    return no_token(wanted, how) if not token else wrong_token(wanted)


def www_authenticate(realm: str, token: str | None) -> str:
    """The 401's ``WWW-Authenticate`` header (RFC 6750 3: ``error="invalid_token"`` only
    when a token was sent)."""
    return f'Bearer realm="{realm}"' + (', error="invalid_token"' if token else "")


def no_admin_token_warning(acts: str, env: str, option: str) -> str:
    """What a service started without an admin token warns (stderr and its log): on a
    loopback address every user of the host reaches it."""
    return (f"no admin token: any user of this host can {acts}; set {env} (or {option}) "
            f"to a token of at least {MIN_ADMIN_TOKEN_CHARS} characters so that only its "
            "holders can")
