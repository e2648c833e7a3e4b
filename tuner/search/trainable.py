"""The Ray Tune trainable: one trial in one Ray actor holding the resources its config needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ray import tune

from tuner.search.ask_tell import Suggestion, TrialReport
from tuner.spec.load import validate
from tuner.spec.study import Study
from tuner.trial.result import TrialResult
from tuner.trial.runner import TrialPlan, run_trial


def trial_dir(output_dir: Path, number: int, trial_id: str) -> Path:
    return output_dir / "trials" / f"{number:03d}-{trial_id}"


def trainable(config: dict[str, Any], *, study_data: dict[str, Any], output_dir: str, base_dir: str) -> None:
    """Runs one config and reports one final result (outcome, objective, SLA violations, the whole trial)."""
    study = validate(Study, study_data, "study")
    trial_id = tune.get_context().get_trial_id() or "local"
    cfg = Suggestion.from_config(config)
    plan = TrialPlan(
        trial_id=trial_id, number=cfg.number, engine=cfg.engine, args=cfg.args, params=cfg.params,
        baseline=cfg.baseline, seed=study.seed, notes=list(cfg.notes), incumbent=cfg.incumbent,
        incumbent_capacity=cfg.incumbent_capacity,
    )
    result = run_trial(study, plan, trial_dir(Path(output_dir), plan.number, trial_id), base_dir=Path(base_dir))
    tune.report(tune_result(study, result))


def tune_result(study: Study, result: TrialResult) -> dict[str, Any]:
    """What the searcher sees (its TrialReport) plus the full trial as JSON, for the driver's recorder."""
    return {**TrialReport.of(study, result).to_tune(), "trial_json": json.dumps(result.to_json(), default=str)}
