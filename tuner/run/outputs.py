"""The study's pareto.json (trials.parquet is tuner.trial.table's). All writes are atomic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.common.atomic import write_json
from tuner.spec.sla import SLATerm
from tuner.trial.pareto import study_front
from tuner.trial.result import TrialResult


def write_pareto(path: Path, trials: list[TrialResult], sla: list[SLATerm], objective: str, latency: str,
                 rejected: list[dict[str, Any]] | None = None, promoted: str | None = None) -> list[TrialResult]:
    front = study_front(trials, objective, latency)
    ids = {t.trial_id for t in front}
    write_json(path, {
        "objective": objective,
        "latency": latency,
        "sla": [str(t) for t in sla],
        "promoted_trial_id": promoted,
        "front": [_point(t, objective, latency) for t in front],
        "feasible_front": [t.trial_id for t in front if t.feasible],
        "points": [_point(t, objective, latency) | {"pareto": t.trial_id in ids} for t in trials if t.outcome.ran],
        "rejected": rejected or [],
    })
    return front


def _point(t: TrialResult, objective: str, latency: str) -> dict[str, Any]:
    return {
        "trial_id": t.trial_id, "number": t.number, "engine": t.engine, "args": t.args,
        "throughput": t.metrics.get(objective), "latency": t.metrics.get(latency),
        "capacity": t.capacity, "feasible": t.feasible, "outcome": t.outcome.value, "baseline": t.baseline,
    }
