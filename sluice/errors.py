"""The one error type for bad user input, shared by every component.

Anything a user hands us (a job YAML file, a topology file, a trace, an API body) that
is wrong raises :class:`InputError`. The CLI turns it into one line naming the source,
the element, the field and the reason, and exits with status 2 — before anything was
queued, installed or started.
"""

from __future__ import annotations

EXIT_BAD_INPUT = 2


class InputError(ValueError):
    """Bad input. ``source`` is a file path (or 'API body', 'argument'...), ``element``
    names the job/host/link/row inside it, ``field`` the offending field."""

    def __init__(self, source: str, reason: str, *, element: str | None = None,
                 field: str | None = None):
        self.source = str(source)
        self.element = element
        self.field = field
        self.reason = reason
        super().__init__(self.format())

    def format(self) -> str:
        parts = [self.source]
        if self.element:
            parts.append(self.element)
        if self.field:
            parts.append(f"field '{self.field}'")
        parts.append(self.reason)
        return ": ".join(parts)
