"""The one error type for bad user input, shared by every component.

Anything a user hands us (a job YAML file, a topology file, a trace, an API body) that
is wrong raises :class:`InputError`. The CLI turns it into one line naming the source,
the element, the field and the reason, and exits with status 2 — before anything was
queued, installed or started. A file with several problems raises :class:`InputErrors`
(still an ``InputError``): every problem is reported in one run, one line each.
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

    @property
    def errors(self) -> list["InputError"]:
        return [self]

    def to_dict(self) -> dict:
        return {"source": self.source, "element": self.element, "field": self.field,
                "reason": self.reason}


class RuleBroken(InputError):
    """Input of the right shape (its schema holds) that breaks a rule no schema can
    express: two jobs of one file with one name, more GPUs than the topology has, the
    same endpoint twice. The REST services answer it with 422 naming the field (400 is
    for what does not parse or does not fit the schema)."""


class InputErrors(InputError):
    """Several problems in one input. Its own source/element/field/reason are the first
    problem's (so code that looks at one error keeps working); ``errors`` has them all."""

    def __init__(self, errors: list[InputError]):
        if not errors:
            raise ValueError("InputErrors needs at least one error")
        self._all = list(errors)
        first = self._all[0]
        super().__init__(first.source, first.reason, element=first.element, field=first.field)

    @property
    def errors(self) -> list[InputError]:
        return list(self._all)

    def format(self) -> str:
        return "\n".join(e.format() for e in getattr(self, "_all", [])) or super().format()


def read_user_text(path) -> str:
    """A file the user named, as UTF-8 text; what keeps it from being read is an
    InputError naming the file."""
    from pathlib import Path

    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(str(path), f"cannot read: {err.strerror or err}")
    except UnicodeDecodeError as err:
        raise InputError(str(path), f"not UTF-8 text: {err.reason} at byte {err.start}")


def raise_all(errors: list[InputError]) -> None:
    """Raise nothing, the one error, or all of them."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InputErrors(errors)


# The source of an error in one of a command's options, named by the field of the config
# that holds it (``option_error``): code below a command's CLI names fields, never flags;
# the CLI that owns the parser turns the field into its flag (``as_flags``).
OPTION = "option"


def option_error(field: str, reason: str) -> InputError:
    return InputError(OPTION, reason, field=field)


def as_flags(err: InputError, flags: dict[str, str]) -> InputError:
    """``err`` with every option error whose field is in ``flags`` (field -> the flag the
    user typed) named by its flag, as argparse names one ("argument --flag: reason");
    any other error unchanged."""
    out = [InputError(f"argument {flags[e.field]}", e.reason)
           if e.source == OPTION and e.field in flags else e for e in err.errors]
    if all(a is b for a, b in zip(out, err.errors)):
        return err
    return out[0] if len(out) == 1 else InputErrors(out)


def _flag(field: str, flags: dict) -> str:
    return flags.get(field, "--" + field.replace("_", "-"))


def flag_error(err: ValueError, flags: dict[str, str]) -> InputError:
    """A config's field-named error (``ValueError("field: message")``, or an
    :class:`InputError` whose source is ``OPTION``) as the flag's InputError, for the CLI
    that owns the parser. ``flags``: field -> flag, where the flag is not "--" and the
    field with "_" as "-"."""
    if isinstance(err, InputError):
        return as_flags(err, {e.field: _flag(e.field, flags) for e in err.errors
                              if e.source == OPTION and e.field})
    field, _, message = str(err).partition(": ")
    return InputError(f"argument {_flag(field, flags)}", message or str(err))
