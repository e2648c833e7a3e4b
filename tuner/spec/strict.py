"""The base of every user-facing model: unknown keys are errors, and true/false is never a number.

YAML reads `max_model_len: true` as a boolean and pydantic's lax mode would take it as 1; a number field
given true/false is refused instead.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

_NUMBERS = {int, float}


def _numeric(annotation: Any) -> bool:
    if annotation in _NUMBERS:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = set(typing.get_args(annotation)) - {type(None)}
        return bool(args) and args <= _NUMBERS
    return False


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, v in data.items():
                field = cls.model_fields.get(key) if isinstance(key, str) else None
                if isinstance(v, bool) and field is not None and _numeric(field.annotation):
                    raise ValueError(f"{key}: got {str(v).lower()}, which is not a number | fix: give a number "
                                     "(true/false is not one)")
        return data
