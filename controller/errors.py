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
    """The body is malformed or names what the controller does not know (a host, a worker)."""


class Unauthorized(Refused):
    """Missing or wrong token."""


class NotFound(Refused):
    """No such job."""


class Conflict(Refused):
    """The job exists already, or its flows are another job's."""


class RateLimited(Refused):
    """The job reports faster than its limit."""
