"""Which SLA term bound a trial's capacity, in words a user acts on: "p99_itl_ms 100.97 ms > 100 ms at 8 req/s".

The capacity search stops at the lowest load whose measurement broke the SLA; the term that broke it
worst there is the binding one (or the term an early stop named). A trial that met the SLA at every
load it tried was bound by the load cap, not by the SLA. The one implementation: trials.parquet,
the progress view, the report and MLflow (tuner.tracking.compare) all read it from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.common.numeric import finite_float
from tuner.spec.sla import SLATerm


@dataclass(frozen=True)
class Binding:
    load: float  # the lowest failing load above the capacity
    unit: str  # req/s or concurrent
    term: SLATerm | None  # None: errors (or an early stop naming no term) broke the point
    value: float | None  # the term's measured value there
    why: str = ""  # when term is None

    def __str__(self) -> str:
        at = f"at {self.load:g} {self.unit}"
        if self.term is None:
            return f"{self.why} {at}"
        u = " ms" if self.term.metric.endswith("_ms") else ""
        shown = "missing" if self.value is None else f"{self.value:.5g}{u}"
        return f"{self.term.name} {shown} > {self.term.limit:g}{u} {at}"


def binding(sla: Sequence[SLATerm], points: Sequence[dict[str, Any]], capacity: float | None,
            mode: str = "rate") -> Binding | None:
    """The binding term at the lowest failing load above `capacity`; None when no such point was measured."""
    unit = "req/s" if mode == "rate" else "concurrent"
    above = [p for p in points if finite_float(p.get("load")) is not None and not p.get("feasible")
             and (capacity is None or p["load"] > capacity)]
    if not sla or not above:
        return None
    point = min(above, key=lambda p: p["load"])
    stopped = point.get("stopped_early")
    if isinstance(stopped, str) and stopped:
        named = [t for t in sla if t.name in stopped]
        if named:
            return Binding(point["load"], unit, named[0], finite_float(point.get(named[0].metric)))
        return Binding(point["load"], unit, None, None, f"load point stopped early ({stopped})")
    measured = [t for t in sla if finite_float(point.get(t.metric)) is not None]
    worst = max(measured, key=lambda t: t.violation(point)) if measured else None
    if worst is None or worst.violation(point) <= 0:
        err = finite_float(point.get("error_rate"))
        return Binding(point["load"], unit, None, None, f"error_rate {err:.3g}" if err is not None else "SLA broken")
    return Binding(point["load"], unit, worst, finite_float(point.get(worst.metric)))


def describe(sla: Sequence[SLATerm], points: Sequence[dict[str, Any]], capacity: float | None,
             mode: str = "rate") -> str:
    """The binding term as one line; "" when nothing was measured."""
    b = binding(sla, points, capacity, mode)
    if b is not None:
        return str(b)
    loads = [x for p in points if (x := finite_float(p.get("load"))) is not None]
    if not loads:
        return ""
    unit = "req/s" if mode == "rate" else "concurrent"
    return f"none: the SLA held up to the highest load tried ({max(loads):g} {unit})"
