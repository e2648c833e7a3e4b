"""The Pareto front of finished trials: highest objective, lowest latency."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tuner.trial.result import TrialResult


def objective_value(trial: TrialResult, objective: str) -> float | None:
    """The objective metric of a trial: its summary value, else the trial's recorded objective."""
    value = trial.metrics.get(objective)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        value = trial.objective
    return None if value is None else float(value)


def _latency(trial: TrialResult, latency: str) -> float:
    value = trial.latency(latency)
    return math.inf if value is None else float(value)  # unknown latency never dominates


def pareto_front(trials: list[TrialResult], objective: str, latency: str) -> list[TrialResult]:
    """Trials no other trial beats on both axes (max `objective`, min `latency`), best objective first.

    Trials without an objective value are left out. Of exact duplicates on both axes, all are kept.
    """
    scored = [(t, objective_value(t, objective), _latency(t, latency)) for t in trials]
    points = [(t, o, lat) for t, o, lat in scored if o is not None and not math.isnan(o)]
    front = []
    for t, o, lat in points:
        dominated = any(
            (o2 >= o and l2 <= lat) and (o2 > o or l2 < lat) for _, o2, l2 in points
        )
        if not dominated:
            front.append((t, o, lat))
    front.sort(key=lambda x: (-x[1], x[2], x[0].number))
    return [t for t, _, _ in front]


def study_front(trials: Sequence[TrialResult], objective: str, latency: str) -> list[TrialResult]:
    """The study's Pareto front: non-dominated SLA-feasible trials (max objective metric, min latency).

    The one definition pareto.json, the report and promotion share. A trial over its SLA is measured
    at another load (its lowest), so it is no point of this trade-off and never on the front.
    """
    ok = [t for t in trials if t.feasible and t.metrics.get(objective) is not None
          and t.metrics.get(latency) is not None]
    return pareto_front(ok, objective, latency)
