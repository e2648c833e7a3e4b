"""The base of every user-facing model: unknown keys are errors, true/false is never a number, numbers
are finite and of a size a count can have, and a text field given is never empty.

YAML reads `max_model_len: true` as a boolean and pydantic's lax mode would take it as 1; a number field
given true/false is refused instead. `.inf` passes `gt=0` and 10**30 passes `gt=0` as an int, then
overflows numpy or hangs a run; `name: ""` would reach the engine or MLflow, and a line break in a name or URI
splits the one-line error and log messages that quote it. Each is refused here with the key and the fix, so
every model inherits the check.
"""

from __future__ import annotations

import math
import re
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

_NUMBERS: set[type] = {int, float}
_TEXTS: set[type] = {str, Path}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PROSE = {"help", "why"}  # free text for people: line breaks and tabs are fine there
BIGGEST = 2**53  # no count, size or duration servetune takes is larger; a float holds it exactly


def _is(annotation: Any, kinds: set[type]) -> bool:
    """The annotation is one of `kinds`, or an optional/union of only those."""
    if annotation in kinds:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = set(typing.get_args(annotation)) - {type(None)}
        return bool(args) and args <= kinds
    return False


def _numeric(annotation: Any) -> bool:
    return _is(annotation, _NUMBERS)


def _number_list(annotation: Any) -> bool:
    """list[int] / list[float], optional or not."""
    args = set(typing.get_args(annotation)) - {type(None)} if typing.get_origin(annotation) in (
        typing.Union, types.UnionType) else {annotation}
    return any(typing.get_origin(a) is list and _numeric(typing.get_args(a)[0]) for a in args)


def _bad_number(key: str, v: Any) -> str | None:
    if isinstance(v, bool):
        return f"{key}: got {str(v).lower()}, which is not a number | fix: give a number (true/false is not one)"
    if isinstance(v, float) and not math.isfinite(v):
        return f"{key}: got {v}, which is not a finite number | fix: give a finite number"
    if isinstance(v, int | float) and abs(v) > BIGGEST:
        return f"{key}: {v:g} is too large (at most {BIGGEST:g}) | fix: give a realistic value"
    return None


def _bad_value(key: str, v: Any, field: Any) -> str | None:
    """Why a value given for this field is refused before pydantic sees it (None: not refused here)."""
    if _numeric(field.annotation):
        return _bad_number(key, v)
    if _number_list(field.annotation) and isinstance(v, list):
        return next((why for i, x in enumerate(v) if (why := _bad_number(f"{key}[{i}]", x))), None)
    if _is(field.annotation, _TEXTS) and field.default != "" and isinstance(v, str) and not v.strip():
        return f"{key}: is empty | fix: give a value, or leave {key} out for its default"
    if _is(field.annotation, _TEXTS) and isinstance(v, str):
        bad = next((c for c in v if _CONTROL.match(c) and not (c in "\n\t" and key in _PROSE)), None)
        if bad is not None:
            return (f"{key}: holds the control character {bad!r} | fix: write it on one line, without control "
                    "characters (a line break here would split log lines, argv values and error messages)")
    return None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, v in data.items():
                field = cls.model_fields.get(key) if isinstance(key, str) else None
                why = _bad_value(key, v, field) if field is not None else None
                if why is not None:
                    raise ValueError(why)
        return data
