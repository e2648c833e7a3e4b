"""Which SLA term bound a trial's capacity, in words a user acts on: "p99_itl_ms 100.97 ms > 100 ms at 8 req/s".

The capacity search stops at the lowest load whose measurement broke the SLA; the term that broke it
worst there is the binding one. A trial that met the SLA at every load it tried was bound by the load
cap, not by the SLA; one that failed at the lowest load names the term that failed there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tuner.spec.sla import SLATerm


def binding_term(sla: Sequence[SLATerm], points: Sequence[dict[str, Any]], capacity: float | None,
                 mode: str = "rate") -> str:
    """The binding SLA term of a trial from its measured load points; "" when nothing was measured."""
    unit = "req/s" if mode == "rate" else "concurrent"
    measured = [p for p in points if _num(p.get("load")) is not None]
    if not measured or not sla:
        return ""
    above = [p for p in measured if not p.get("feasible") and (capacity is None or p["load"] > capacity)]
    if not above:
        top = max(p["load"] for p in measured)
        return f"none: the SLA held up to the highest load tried ({top:g} {unit})"
    point = min(above, key=lambda p: p["load"])
    at = f"at {point['load']:g} {unit}"
    if point.get("stopped_early"):
        return f"load point stopped early {at} ({point['stopped_early']})"
    term = max(sla, key=lambda t: t.violation(point))
    value = _num(point.get(term.metric))
    if term.violation(point) <= 0:  # every latency term held: errors broke the point
        err = _num(point.get("error_rate"))
        return f"error_rate {err:.3g} {at}" if err is not None else f"SLA broken {at}"
    unit_v = " ms" if term.metric.endswith("_ms") else ""
    shown = "missing" if value is None else f"{value:.5g}{unit_v}"
    return f"{term.name} {shown} > {term.limit:g}{unit_v} {at}"


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f
