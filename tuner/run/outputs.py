"""The study's output folder: trials.parquet, pareto.json, summary lines. All writes are atomic."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuner.common.atomic import write_json, write_table
from tuner.spec.sla import SLATerm
from tuner.trial.result import TrialResult


def write_trials(path: Path, trials: list[TrialResult]) -> None:
    import pyarrow as pa

    rows = [t.to_row() for t in sorted(trials, key=lambda t: t.number)]
    if not rows:
        return
    cols = sorted({k for r in rows for k in r}, key=lambda k: (k.startswith(("param.", "metric.")), k))
    table = pa.table({c: [_cell(r.get(c)) for r in rows] for c in cols})
    write_table(path, table)


def _cell(v: Any) -> Any:
    return v if v is None or isinstance(v, (str, int, float, bool)) else str(v)


def read_trials(path: Path) -> list[TrialResult]:
    import pyarrow.parquet as pq

    if not path.exists():
        return []
    return [TrialResult.from_row(r) for r in pq.read_table(path).to_pylist()]


def pareto(trials: Sequence[TrialResult], objective: str, latency: str) -> list[TrialResult]:
    """The study's Pareto front: non-dominated SLA-feasible trials (max objective metric, min latency).

    The one definition pareto.json, the report and promotion share. A trial over its SLA is measured
    at another load (its lowest), so it is no point of this trade-off and never on the front.
    """
    from tuner.promote.pareto import pareto_front

    ok = [t for t in trials if t.feasible and t.metrics.get(objective) is not None
          and t.metrics.get(latency) is not None]
    return pareto_front(ok, objective, latency)


def write_pareto(path: Path, trials: list[TrialResult], sla: list[SLATerm], objective: str, latency: str,
                 rejected: list[dict[str, Any]] | None = None, promoted: str | None = None) -> list[TrialResult]:
    front = pareto(trials, objective, latency)
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
