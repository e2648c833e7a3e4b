"""The Ray Tune trainable: one trial in one Ray actor holding the resources its config needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ray import tune

from tuner.spec.load import validate
from tuner.spec.study import Study
from tuner.trial.runner import TrialPlan, run_trial, violations


def trial_dir(output_dir: Path, number: int, trial_id: str) -> Path:
    return output_dir / "trials" / f"{number:03d}-{trial_id}"


def trainable(config: dict[str, Any], *, study_data: dict[str, Any], output_dir: str, base_dir: str) -> None:
    """Runs one config and reports one final result (outcome, objective, SLA violations, the whole trial)."""
    study = validate(Study, study_data, "study")
    trial_id = tune.get_context().get_trial_id() or "local"
    plan = TrialPlan(
        trial_id=trial_id, number=int(config.get("number", 0)), engine=config["engine"],
        args=dict(config.get("args", {})), params=dict(config.get("params", {})),
        baseline=bool(config.get("baseline", False)), seed=study.seed, notes=list(config.get("notes", [])),
        incumbent=config.get("incumbent"), incumbent_capacity=config.get("incumbent_capacity"),
    )
    result = run_trial(study, plan, trial_dir(Path(output_dir), plan.number, trial_id), base_dir=Path(base_dir))
    tune.report(result_metrics(study, result))


def result_metrics(study: Study, result: Any) -> dict[str, Any]:
    """What the searcher sees (outcome, objective, per-term violations) plus the full trial as JSON."""
    return {
        "outcome": result.outcome.value,
        "objective": result.objective,
        "violations": violations(study, result) if result.metrics else [1.0] * len(study.sla),
        "latency": result.metrics.get(study.objective.latency_metric),
        "capacity": result.capacity,
        "trial_json": json.dumps(result.to_json(), default=str),
    }
