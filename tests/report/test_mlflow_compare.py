"""MLflow as the place users compare trials: experiment kind, one short metric set, one knob naming, plots."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from report_fixtures import SLA

from tuner.tracking.compare import COMPARE_METRICS, EXPERIMENT_KIND, binding_term, rounded
from tuner.tracking.mlflow_log import StudyTracker
from tuner.trial.result import TrialResult


def test_rounding_keeps_four_significant_digits_and_never_invents_zero() -> None:
    assert rounded(1234.5678) == 1235.0 and rounded(0.00123456) == 0.001235 and rounded(98.76543) == 98.77
    assert rounded(None) is None and rounded(float("nan")) is None and rounded(0) == 0.0


def test_binding_term_is_the_worst_term_at_the_first_failing_load(study_trials: list[TrialResult]) -> None:
    t = study_trials[1]  # points at 0.5x, 1x (feasible) and 1.5x capacity, where P99 TTFT is 1.5 x 420 = 630 > 500
    assert binding_term(t, SLA) == "p99_ttft_ms"
    t.points[-1]["p99_ttft_ms"] = 100.0
    t.points[-1]["p99_e2el_ms"] = 25000.0
    assert binding_term(t, SLA) == "p99_e2el_ms"
    t.points = t.points[:2]
    assert binding_term(t, SLA) is None  # nothing failed above the capacity: the search's upper bound bound it


def test_child_runs_line_up_in_the_compare_view(tmp_path: Path, study_trials: list[TrialResult]) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = StudyTracker(uri, "cmp", "cmp", tmp_path / "art", sla=SLA)
    tracker.start()
    names = ["max_num_seqs", "block_size", "enable_chunked_prefill"]
    defaults = {"max_num_seqs": 256, "block_size": 16, "enable_chunked_prefill": True}
    ids = {t.trial_id: tracker.log_trial(t, names, defaults) for t in study_trials}
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("cmp")
    assert exp.tags["mlflow.experimentKind"] == EXPERIMENT_KIND  # the UI opens it as an ML experiment
    StudyTracker(uri, "cmp", "cmp", tmp_path / "art", sla=SLA)  # reopening keeps the kind
    assert client.get_experiment_by_name("cmp").tags["mlflow.experimentKind"] == EXPERIMENT_KIND
    ok_keys = None
    for t in study_trials:
        run = client.get_run(ids[t.trial_id])
        assert run.data.params["outcome"] == t.outcome.value == run.data.tags["servetune.outcome"]
        assert {n: run.data.params[n] for n in names} == {n: str(t.args.get(n, defaults[n])) for n in names}
        assert not any(k.startswith(("arg.", "point.")) for k in run.data.params | run.data.metrics)
        if t.feasible:
            keys = set(run.data.metrics) & set(COMPARE_METRICS)
            ok_keys = ok_keys or keys
            assert keys == ok_keys and {"objective", "sla_capacity", "output_throughput", "p99_ttft_ms"} <= keys
            assert run.data.metrics["objective"] == rounded(t.objective)
            assert run.data.metrics["p99_ttft_ms"] == rounded(t.metrics["p99_ttft_ms"])
            over = t.points[-1]["p99_ttft_ms"] > 500  # the fixture's failing point only measures TTFT
            want = "p99_ttft_ms" if over else "none"
            assert run.data.params["binding_sla"] == run.data.tags["servetune.binding_sla"] == want
            plots = {f.path for f in client.list_artifacts(run.info.run_id, "plots")}
            assert plots == {"plots/latency_cdf.png", "plots/throughput.png", "plots/load_points.png"}
            png = Path(client.download_artifacts(run.info.run_id, "plots/latency_cdf.png", str(tmp_path / "dl")))
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        else:
            assert "objective" not in run.data.metrics and "sla_capacity" not in run.data.metrics  # never a fake 0
    assert ok_keys is not None


@pytest.mark.parametrize("value", [float("inf"), -float("inf")])
def test_rounding_of_infinities(value: float) -> None:
    assert rounded(value) is None
