"""The two messages between the searcher and a trial: what to run (`Suggestion`) and what came of it
(`TrialReport`). Ray Tune carries them as plain dicts (a trial's config, a reported result); they are
converted at that edge only (`to_config`/`from_config`, `to_tune`/`from_tune`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.common.numeric import finite_float
from tuner.trial.outcome import TrialOutcome

if TYPE_CHECKING:
    from tuner.spec.study import Study
    from tuner.trial.result import TrialResult


@dataclass(frozen=True)
class Suggestion:
    """One config to launch, numbered in launch order."""

    number: int
    engine: str
    params: dict[str, Any]  # what the sampler drew (empty for a baseline)
    args: dict[str, Any]  # engine arguments to launch: params + fixed, after constraint repair
    notes: list[str] = field(default_factory=list)  # e.g. constraint repairs
    baseline: bool = False
    incumbent: float | None = None  # best SLA-feasible objective so far (the rung stop's bar)
    incumbent_capacity: float | None = None

    def to_config(self) -> dict[str, Any]:
        """The Ray Tune trial config."""
        return asdict(self)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Suggestion:
        return cls(number=int(config.get("number", -1)), engine=str(config.get("engine", "?")),
                   params=dict(config.get("params") or {}), args=dict(config.get("args") or {}),
                   notes=list(config.get("notes") or []), baseline=bool(config.get("baseline", False)),
                   incumbent=config.get("incumbent"), incumbent_capacity=config.get("incumbent_capacity"))


@dataclass(frozen=True)
class TrialReport:
    """What the searcher learns from one finished trial. A failure has no objective: never a fake zero."""

    outcome: TrialOutcome
    objective: float | None = None
    latency: float | None = None  # the study's latency metric at the reported point
    capacity: float | None = None
    violations: list[float | None] = field(default_factory=list)  # per SLA term, (value - limit) / limit
    reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)  # summary at the reported point
    points: int = 0  # load points measured
    load_points: list[Any] = field(default_factory=list)  # the points themselves (simulated trials)
    early_stopped: bool = False
    records_path: str | None = None  # the reported point's per-request records (Parquet), where the trial kept them

    @classmethod
    def failed(cls, outcome: TrialOutcome, reason: str) -> TrialReport:
        return cls(outcome=outcome, reason=reason)

    @classmethod
    def of(cls, study: Study, result: TrialResult) -> TrialReport:
        """A finished TrialResult as the searcher sees it."""
        m = result.metrics
        return cls(
            outcome=result.outcome, objective=result.objective, capacity=result.capacity, reason=result.reason,
            latency=finite_float(m.get(study.objective.latency_metric)), metrics=dict(m), points=len(result.points),
            violations=[t.violation(m) for t in study.sla] if m else [1.0] * len(study.sla),
            records_path=result.records_path,
        )

    def to_tune(self) -> dict[str, Any]:
        """The result dict `tune.report` takes (JSON-friendly; the points stay behind)."""
        d = asdict(self)
        d["outcome"] = self.outcome.value
        d.pop("load_points")
        return d

    @classmethod
    def from_tune(cls, result: Mapping[str, Any] | None) -> TrialReport:
        """A reported result back; anything without a known outcome is a crash."""
        result = result or {}
        try:
            outcome = TrialOutcome(result.get("outcome"))
        except ValueError:
            return cls.failed(TrialOutcome.CRASHED, str(result.get("reason") or "the trainable raised"))
        metrics = result.get("metrics")
        return cls(outcome=outcome, objective=finite_float(result.get("objective")), latency=finite_float(result.get("latency")),
                   capacity=finite_float(result.get("capacity")), violations=list(result.get("violations") or []),
                   reason=str(result.get("reason") or ""), metrics=dict(metrics) if isinstance(metrics, dict) else {},
                   points=int(result.get("points") or 0), early_stopped=bool(result.get("early_stopped")),
                   records_path=str(result["records_path"]) if result.get("records_path") else None)
