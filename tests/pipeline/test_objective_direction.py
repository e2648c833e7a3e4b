"""Every metric has its natural direction: the objective (maximised at the SLA capacity) must be a
throughput, the latency metric a latency; a study that says otherwise is refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli, small_study
from tuner.common.errors import SpecError
from tuner.common.metric_keys import natural_direction
from tuner.spec.load import validate
from tuner.spec.study import Study


def _study(**objective: object) -> Study:
    return validate(Study, {"name": "d", "engine": "sim", "model": {"name": "Qwen/Qwen3-8B"},
                            "workload": {"profile": "dynamic"}, "sla": ["p99_ttft_ms <= 1000"],
                            "objective": objective}, "study.yaml")


@pytest.mark.parametrize(("key", "direction"), [
    ("p99_ttft_ms", "minimize"), ("median_itl_ms", "minimize"), ("p99.9_e2el_ms", "minimize"),
    ("jitter_tpot", "minimize"), ("error_rate", "minimize"), ("class.chat.p99_tpot_ms", "minimize"),
    ("output_throughput", "maximize"), ("request_goodput", "maximize"), ("class.chat.request_throughput", "maximize"),
])
def test_natural_direction(key: str, direction: str) -> None:
    assert natural_direction(key) == direction


def test_latency_objective_is_refused_not_maximised() -> None:
    with pytest.raises(SpecError) as exc:
        _study(metric="p99_ttft_ms")
    assert "objective" in str(exc.value) and "lower is better" in str(exc.value)


def test_contradicting_direction_is_refused() -> None:
    with pytest.raises(SpecError, match="contradicts"):
        _study(metric="output_throughput", direction="minimize")
    with pytest.raises(SpecError, match="latency_metric"):
        _study(mode="multi", latency_metric="request_throughput")
    assert _study(metric="output_throughput", direction="maximize").objective.direction == "maximize"
    assert _study(mode="multi", latency_metric="p99_itl_ms").objective.latency_metric == "p99_itl_ms"


def test_cli_exits_2_on_a_latency_objective(tmp_path: Path) -> None:
    study = small_study(tmp_path, objective={"metric": "p99_ttft_ms"})
    proc = run_cli("--study", str(study), "--output", str(tmp_path / "out"), timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "p99_ttft_ms" in proc.stderr and "fix:" in proc.stderr
    assert not (tmp_path / "out" / "trials.parquet").exists()
