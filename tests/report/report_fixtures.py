"""Synthetic finished trials for the report tests: real TrialResults with real per-request Parquet files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tuner.spec.sla import parse_sla
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult

SLA = parse_sla("p99_ttft_ms <= 500, p99_e2el_ms <= 20000")
OBJ, LAT = "output_throughput", "p99_ttft_ms"


def write_records(path: Path, ttft_ms: np.ndarray, *, load: float | None = None, drop_latency_columns: bool = False,
                  errors: int = 0) -> Path:
    """Per-request Parquet in the records_io column layout (latency columns optional)."""
    n = len(ttft_ms)
    sent = np.arange(n) * 0.1
    first = sent + ttft_ms / 1000.0
    out_tokens = np.full(n, 128)
    done = first + 127 * 0.02
    cols = {
        "id": np.arange(n), "cls": ["default"] * n, "input_len": np.full(n, 512), "output_len": out_tokens,
        "sent_s": sent, "first_token_s": first, "done_s": done, "output_tokens": out_tokens,
        "error": [("timeout" if i < errors else None) for i in range(n)],
    }
    if not drop_latency_columns:
        cols["ttft_ms"] = ttft_ms
        cols["e2el_ms"] = (done - sent) * 1000.0
        cols["tpot_ms"] = (done - first) * 1000.0 / 127
        cols["token_times"] = [[float(f) + 0.02 * j for j in range(128)] for f in first]
    if load is not None:
        cols["load"] = np.full(n, load)
    pq.write_table(pa.table(cols), path)
    return path


def make_trial(tmp: Path, number: int, outcome: TrialOutcome, *, tput: float | None = None,
               p99: float | None = None, params: dict | None = None, baseline: bool = False,
               reason: str = "", engine: str = "sim", resolved: dict | None = None) -> TrialResult:
    """One finished trial; ran trials get load points and a records file whose P99 is near `p99`."""
    tid = f"t{number:03d}"
    metrics: dict[str, float] = {}
    points: list[dict] = []
    records = None
    capacity = None
    if outcome.ran and tput is not None and p99 is not None:
        capacity = tput / 100.0
        metrics = {OBJ: tput, LAT: p99, "p50_ttft_ms": p99 / 3, "p99_e2el_ms": p99 * 10, "error_rate": 0.0}
        for frac in (0.5, 1.0, 1.5):
            points.append({"load": capacity * frac, "feasible": frac <= 1.0 and outcome == TrialOutcome.OK,
                           "violation": frac - 1.0, "stopped_early": False, OBJ: tput * frac, LAT: p99 * frac})
        rng = np.random.default_rng(number)
        ttft = rng.gamma(4.0, p99 / 10.0, size=400)
        records = str(write_records(tmp / f"{tid}.parquet", ttft, load=capacity))
    return TrialResult(
        trial_id=tid, number=number, engine=engine, params=params or {}, args=dict(params or {}),
        outcome=outcome, reason=reason, capacity=capacity if outcome == TrialOutcome.OK else None,
        objective=tput if outcome == TrialOutcome.OK else None, metrics=metrics, points=points,
        wall_s=12.5 + number, records_path=records, baseline=baseline, resolved=resolved or {})
