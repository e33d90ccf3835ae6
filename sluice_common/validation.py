"""pydantic validation errors -> :class:`InputError` lines naming file, element and field.

The typed models (job file, topology) report every problem at once; this turns each of
pydantic's error records into the project's wording (``must be >= 1, got -4``), with the
location split into the element (``job 'a'``, ``host #2``) and the field path
(``layers[1].w``).
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import ValidationError

from sluice_common.errors import InputError

# element label for a location prefix: (loc, raw document) -> (label, rest of loc) or None
Labeler = Callable[[tuple, Any], "tuple[str | None, tuple] | None"]


def _got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def reason_of(err: dict) -> str:
    """The project's wording for one pydantic error record."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "missing":
        return "missing"
    if kind == "extra_forbidden":
        allowed = ctx.get("allowed")
        return f"unknown field (allowed: {allowed})" if allowed else "unknown field"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer, got {_got(value)}"
    if kind in ("float_type", "float_parsing"):
        return f"must be a number, got {_got(value)}"
    if kind in ("string_type", "string_too_short"):
        return f"must be a non-empty string, got {_got(value)}"
    if kind == "greater_than_equal":
        return f"must be >= {ctx['ge']}, got {_got(value)}"
    if kind == "less_than_equal":
        return f"must be <= {ctx['le']}, got {_got(value)}"
    if kind == "greater_than":
        return f"must be > {ctx['gt']}, got {_got(value)}"
    if kind == "finite_number":
        return f"must be a finite number, got {_got(value)}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping, got {type(value).__name__}"
    if kind in ("list_type", "too_short"):
        return f"must be a non-empty list, got {_got(value)}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {_got(value)}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return f"must be one of {ctx.get('expected_tags', 'the known kinds')}, got " \
               f"{_got(ctx.get('tag'))}"
    if kind == "value_error":        # our own validators: the message is the reason
        return str(ctx.get("error", err["msg"]))
    return err["msg"]


def field_path(loc: tuple) -> str | None:
    """('layers', 1, 'w') -> 'layers[1].w'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or None


def input_errors(err: ValidationError, source: str, labeler: Labeler, data: Any,
                 allowed: Callable[[tuple], str | None] = lambda loc: None) -> list[InputError]:
    """Every record of ``err`` as an InputError. ``labeler`` names the element a
    location is in; ``allowed(loc)`` lists the allowed fields for an unknown one."""
    out: list[InputError] = []
    seen: set[str] = set()
    for record in err.errors():
        loc = tuple(record["loc"])
        if record["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc += (str((record.get("ctx") or {}).get("discriminator", "type")).strip("'"),)
        if record["type"] == "extra_forbidden":
            record = {**record, "ctx": {"allowed": allowed(loc[:-1])}}
        element, rest = labeler(loc, data)
        one = InputError(source, reason_of(record), element=element, field=field_path(rest))
        if one.format() not in seen:      # a union may report the same problem twice
            seen.add(one.format())
            out.append(one)
    return out


def validate_document(model: type, data: Any, source: str, labeler: Labeler,
                      allowed: Callable[[tuple], str | None],
                      cross_checks: Callable[[Any, str], list[InputError]]):
    """``model`` validated from ``data`` plus the cross-element checks, all in one run:
    (the parsed model, []) or (None, every problem)."""
    errors: list[InputError] = []
    parsed = None
    try:
        parsed = model.model_validate(data)
    except ValidationError as err:
        errors = input_errors(err, source, labeler, data, allowed)
    errors += cross_checks(data, source)
    return (parsed if not errors else None), errors
