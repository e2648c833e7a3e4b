"""Numbers from loosely typed places (summaries, Parquet cells): a finite float or None, never NaN."""

from __future__ import annotations

import math
from typing import Any


def finite_float(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f
