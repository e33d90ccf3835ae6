"""Why the controller refuses a request, in its own terms (no HTTP here).

The service and the northbound guard raise these; the REST API (controller/api.py) maps
each kind to its status code in one table. A refused request changes nothing. The
reason never contains a token.
"""

from __future__ import annotations


class Refused(Exception):
    """A request the controller does not carry out, and why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class BadRequest(Refused):
    """The body does not fit its request model: not JSON, a wrong type, a missing or
    unknown field, a value out of its documented bounds (the OpenAPI document says it)."""


class Unprocessable(Refused):
    """A body that fits its request model but breaks a rule no schema expresses (a
    duplicate server or worker id, one endpoint twice, a PS on a worker's own address
    and port, an IP that is not a host of the topology, a worker the job does not
    have); ``field`` names what to fix."""

    def __init__(self, reason: str, field: str | None = None):
        super().__init__(reason)
        self.field = field


class Unauthorized(Refused):
    """Missing or wrong token; ``token_given``: whether the request carried one (the
    answer's ``WWW-Authenticate`` says ``invalid_token`` then, RFC 6750)."""

    def __init__(self, reason: str, token_given: bool = False):
        super().__init__(reason)
        self.token_given = token_given


class NotFound(Refused):
    """No such job."""


class Conflict(Refused):
    """The job exists already, or its flows are another job's."""


class RateLimited(Refused):
    """The job reports faster than its limit."""
