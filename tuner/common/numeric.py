"""Numbers from loosely typed places (summaries, Parquet cells): a finite float or None, never NaN."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def finite_float(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def json_safe(value: Any) -> Any:
    """NaN and infinities become null, recursively (JSON has no NaN; `json.dumps` would write invalid JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
