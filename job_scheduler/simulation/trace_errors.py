"""Every error of a trace file at once: a malformed trace is reported by all its bad rows
and fields (up to MAX_ERRORS, then a count of the rest), each naming the file, the row
and the field; nothing is loaded."""

from __future__ import annotations

from sluice_common.errors import InputError, InputErrors

MAX_ERRORS = 100    # a trace that is wrong everywhere is reported by its first 100 errors


class TraceErrors(InputErrors):
    """Every error of a trace file at once (the first MAX_ERRORS of them; ``more``
    counts the rest)."""

    def __init__(self, errors: list[InputError], more: int = 0):
        self.more = more
        super().__init__(errors)

    def format(self) -> str:
        text = super().format()
        if getattr(self, "more", 0):
            text += (f"\n{self.source}: ... and {self.more} more errors "
                     f"({len(self.errors) + self.more} in all)")
        return text
