"""The end of `python -m tuner.run` names what a user needs next: the MLflow parent run id, the
registered model version and the alias it moved, the confirmed gain, and how to promote later."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixtures import make_trial

from tuner.promote.pipeline import PromotionResult
from tuner.run.summary import print_summary
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome


def _study() -> Study:
    return Study.model_validate({"name": "s", "engine": "sim", "model": {"name": "Qwen/Qwen3-8B"},
                                 "workload": {"profile": "dynamic"}, "sla": ["p99_ttft_ms <= 1000"]})


def test_summary_names_parent_run_version_and_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_trial(tmp_path, 0, TrialOutcome.OK, tput=1000, p99=300, baseline=True)
    best = make_trial(tmp_path, 1, TrialOutcome.OK, tput=1500, p99=400)
    promo = PromotionResult(True, "trial t001 ...", best, [], 1450.0, "s-config", "3", tmp_path / "promoted.yaml",
                            "prun", [], gain=1.45, baseline_worst_objective=1000.0, alias="staging")
    print_summary(_study(), [base, best], tmp_path, "sqlite:///x.db", promo, [], 1.0, parent_run_id="abc123")
    out = capsys.readouterr().out
    assert "MLflow parent run: abc123" in out
    assert "registered model: s-config version 3, alias staging -> version 3" in out
    assert "gain over the defaults: 1.450x (confirmed worst cases, same seeds)" in out


def test_summary_without_promotion_says_how_to_promote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    best = make_trial(tmp_path, 1, TrialOutcome.OK, tput=1500, p99=400)
    print_summary(_study(), [best], tmp_path, "sqlite:///x.db", None, [], 1.0, parent_run_id="abc123")
    out = capsys.readouterr().out
    assert "python -m tuner.promote --study-run abc123 --mlflow-uri sqlite:///x.db" in out
