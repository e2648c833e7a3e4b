"""Each trial records which SLA term bound its capacity, in words, and the progress view names the
study's real objective and that term."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
from report_fixtures import make_trial

from tuner.run.flow import _progress
from tuner.spec.sla import parse_sla
from tuner.spec.study import Study
from tuner.trial.binding import describe
from tuner.trial.outcome import TrialOutcome
from tuner.trial.table import read_trials, write_trials

SLA = parse_sla(["p99_ttft_ms <= 1000", "p99_itl_ms <= 100"])
POINTS = [
    {"load": 2.0, "feasible": True, "p99_ttft_ms": 200.0, "p99_itl_ms": 40.0},
    {"load": 16.0, "feasible": False, "p99_ttft_ms": 4000.0, "p99_itl_ms": 300.0},
    {"load": 8.0, "feasible": False, "p99_ttft_ms": 900.0, "p99_itl_ms": 100.97},
    {"load": 4.0, "feasible": True, "p99_ttft_ms": 300.0, "p99_itl_ms": 60.0},
]


def test_binding_term_in_words() -> None:
    assert describe(SLA, POINTS, 4.0) == "p99_itl_ms 100.97 ms > 100 ms at 8 req/s"
    assert describe(SLA, POINTS[:1], 2.0) == "none: the SLA held up to the highest load tried (2 req/s)"
    failed_first = [{"load": 0.5, "feasible": False, "p99_ttft_ms": 1500.0, "p99_itl_ms": 20.0}]
    assert describe(SLA, failed_first, None, "concurrency") == "p99_ttft_ms 1500 ms > 1000 ms at 0.5 concurrent"
    errors = [{"load": 8.0, "feasible": False, "p99_ttft_ms": 10.0, "p99_itl_ms": 1.0, "error_rate": 0.2}]
    assert describe(SLA, errors, 4.0) == "error_rate 0.2 at 8 req/s"
    assert describe(SLA, [], None) == ""


def test_binding_in_trials_parquet_and_progress(tmp_path: Path) -> None:
    t = make_trial(tmp_path, 1, TrialOutcome.OK, tput=1500, p99=400)
    t.binding = describe(SLA, POINTS, 4.0)
    write_trials(tmp_path / "trials.parquet", [t])
    assert read_trials(tmp_path / "trials.parquet")[0].binding == t.binding
    assert pa.parquet.read_table(tmp_path / "trials.parquet").column("binding").to_pylist() == [t.binding]

    study = Study.model_validate({"name": "p", "engine": "sim", "model": {"name": "Qwen/Qwen3-8B"},
                                  "workload": {"profile": "dynamic"}, "sla": ["p99_ttft_ms <= 1000"],
                                  "objective": {"metric": "request_goodput"}})
    progress = _progress(study, 3)
    out = io.StringIO()
    progress._stream, progress._live_wanted = out, False
    progress.trial_finished(t)
    line = out.getvalue()
    assert "request_goodput=" in line and "output_throughput=" not in line
    assert "bound by p99_itl_ms 100.97 ms > 100 ms at 8 req/s" in line
