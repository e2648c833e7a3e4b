"""trials.parquet: one row per finished trial, written atomically after each one (the study's record)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.common.atomic import read_table, write_table
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
    if not path.exists():
        return []
    return [TrialResult.from_row(r) for r in read_table(path).to_pylist()]
