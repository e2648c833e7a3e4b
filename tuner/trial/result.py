"""One finished trial, as every later stage sees it (outputs, MLflow, report, promotion)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from tuner.common.metric_keys import renamed
from tuner.common.numeric import finite_float
from tuner.trial.outcome import TrialOutcome


@dataclass
class TrialResult:
    trial_id: str
    number: int
    engine: str
    params: dict[str, Any]  # what the searcher sampled
    args: dict[str, Any]  # engine arguments launched (params + fixed, after repair)
    outcome: TrialOutcome
    reason: str = ""
    capacity: float | None = None  # highest SLA-feasible offered load (req/s or concurrency)
    objective: float | None = None  # objective metric at capacity (None unless outcome is ok)
    metrics: dict[str, float] = field(default_factory=dict)  # summary at the capacity point
    points: list[dict[str, Any]] = field(default_factory=list)  # every load point measured
    start_s: float | None = None  # engine start -> ready
    wall_s: float = 0.0
    records_path: str | None = None
    log_path: str | None = None
    resolved: dict[str, Any] = field(default_factory=dict)  # config as the engine reported it
    baseline: bool = False
    seed: int = 0
    mlflow_run_id: str | None = None
    notes: list[str] = field(default_factory=list)  # e.g. constraint repairs
    binding: str = ""  # the SLA term that bound the capacity, in words (tuner.trial.binding)
    output_check: str = ""  # verdict of the output check against the baseline (tuner.spec.levers)
    gpus: list[int] = field(default_factory=list)  # GPUs the trial held (Ray's or the local executor's assignment)
    started_at: float | None = None  # epoch seconds: when the trial began and ended (overlap, GPU timeline)
    ended_at: float | None = None

    @property
    def labels(self) -> list[str]:
        """Output-changing classes this config uses (fp8_weights, fp8_kv_cache, speculative_decoding)."""
        from tuner.spec.levers import labels

        return labels(self.args)

    @property
    def feasible(self) -> bool:
        return self.outcome == TrialOutcome.OK and self.objective is not None

    def latency(self, key: str) -> float | None:
        v = self.metrics.get(key)
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else v

    def to_row(self) -> dict[str, Any]:
        """Flat row for trials.parquet: scalar columns plus JSON for nested fields."""
        row: dict[str, Any] = {
            "trial_id": self.trial_id,
            "number": self.number,
            "engine": self.engine,
            "outcome": self.outcome.value,
            "reason": self.reason,
            "feasible": self.feasible,
            "baseline": self.baseline,
            "capacity": self.capacity,
            "objective": self.objective,
            "start_s": self.start_s,
            "wall_s": self.wall_s,
            "seed": self.seed,
            "records_path": self.records_path,
            "log_path": self.log_path,
            "mlflow_run_id": self.mlflow_run_id,
            "params_json": json.dumps(self.params, sort_keys=True, default=str),
            "args_json": json.dumps(self.args, sort_keys=True, default=str),
            "metrics_json": json.dumps(self.metrics, sort_keys=True),
            "points_json": json.dumps(self.points, default=str),
            "resolved_json": json.dumps(self.resolved, default=str),
            "notes_json": json.dumps(self.notes),
            "binding": self.binding,
            "output_labels": ",".join(self.labels),
            "output_check": self.output_check,
            "gpus": ",".join(map(str, self.gpus)),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }
        for k, v in self.params.items():
            row[f"param.{k}"] = str(v)
        for k in ("output_throughput", "request_throughput", "request_goodput", "p99_ttft_ms", "p99_tpot_ms",
                  "p99_itl_ms", "p99_e2el_ms", "p50_ttft_ms", "error_rate",
                  "client_error_ms", "client_suspect"):  # the load generator's own error bar (tuner.load.ruler)
            row[f"metric.{k}"] = self.metrics.get(k)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TrialResult:
        return cls(
            trial_id=row["trial_id"],
            number=int(row["number"]),
            engine=row["engine"],
            params=json.loads(row["params_json"]),
            args=json.loads(row["args_json"]),
            outcome=TrialOutcome(row["outcome"]),
            reason=row.get("reason") or "",
            capacity=finite_float(row.get("capacity")),
            objective=finite_float(row.get("objective")),
            metrics=current_names(json.loads(row["metrics_json"])),
            points=[current_names(p) for p in json.loads(row["points_json"])],
            start_s=finite_float(row.get("start_s")),
            wall_s=float(row.get("wall_s") or 0.0),
            records_path=row.get("records_path"),
            log_path=row.get("log_path"),
            resolved=json.loads(row.get("resolved_json") or "{}"),
            baseline=bool(row.get("baseline")),
            seed=int(row.get("seed") or 0),
            mlflow_run_id=row.get("mlflow_run_id"),
            notes=json.loads(row.get("notes_json") or "[]"),
            binding=row.get("binding") or "",
            output_check=row.get("output_check") or "",
            gpus=[int(g) for g in (row.get("gpus") or "").split(",") if g],
            started_at=finite_float(row.get("started_at")),
            ended_at=finite_float(row.get("ended_at")),
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrialResult:
        """`to_json` back (a trial reported by a Ray actor or a local worker process)."""
        return cls(**{**d, "outcome": TrialOutcome(d["outcome"])})

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = self.outcome.value
        return d


def current_names(d: dict[str, Any]) -> dict[str, Any]:
    """A stored summary under today's keys: trials.parquet written before the vLLM names still reads."""
    return {renamed(k) or k: v for k, v in d.items()}
