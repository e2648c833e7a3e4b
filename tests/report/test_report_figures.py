"""The figures: Pareto logic, SLA line, failed trials never drawn as zero, CDFs from real Parquet files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from report_fixtures import LAT, OBJ, SLA, make_trial, write_records

from tuner.tracking.plots import best_feasible, figures, latency_samples, pareto_ids
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult


def _traces(fig, name: str):
    return [t for t in fig.data if t.name == name]


def test_pareto_front_is_the_non_dominated_feasible_set(study_trials: list[TrialResult]) -> None:
    # t004 has the highest throughput but violates the SLA, so it must not be on the front.
    assert pareto_ids(study_trials, OBJ, LAT) == {"t001", "t002"}


def test_best_feasible_ignores_infeasible_and_failed(study_trials: list[TrialResult]) -> None:
    best = best_feasible(study_trials)
    assert best is not None and best.trial_id == "t001"
    assert best_feasible([t for t in study_trials if not t.feasible]) is None


def test_pareto_figure_marks_feasible_infeasible_promoted_and_sla(study_trials: list[TrialResult]) -> None:
    figs = figures(study_trials, sla=SLA, objective_metric=OBJ, latency_metric=LAT,
                   promoted_trial_id="t002", baseline_trial_id="t000")
    fig = figs["pareto"]
    feasible = _traces(fig, "feasible")[0]
    infeasible = _traces(fig, "infeasible")[0]
    assert sorted(feasible.y) == [1000, 1400, 1500, 1800]
    assert list(infeasible.y) == [2500]  # the OOM / start-failed trials have no point at all (never zero)
    promoted = _traces(fig, "promoted")[0]
    assert list(promoted.x) == [200] and list(promoted.y) == [1500]
    baseline = _traces(fig, "baseline")[0]
    assert list(baseline.x) == [300] and list(baseline.y) == [1000]
    front = _traces(fig, "Pareto front")[0]
    assert list(front.x) == [200, 420]
    sla_lines = [s for s in fig.layout.shapes if s.x0 == 500 and s.x1 == 500]
    assert len(sla_lines) == 1  # only the term on the plotted latency metric
    assert len(_traces(fig, "all load points")[0].x) == 3 * 5
    # Zoomed to the trials and the SLA line; the farthest load point (900 * 1.5) is a zoom-out away.
    assert tuple(fig.layout.xaxis.range) == (0, pytest.approx(1.15 * 900))


def test_parallel_coordinates_keeps_failed_trials_on_a_labelled_level(study_trials: list[TrialResult]) -> None:
    fig = figures(study_trials, sla=SLA, objective_metric=OBJ, latency_metric=LAT,
                  promoted_trial_id=None, baseline_trial_id=None)["parallel_coordinates"]
    dims = {d.label: d for d in fig.data[0].dimensions}
    assert set(dims) == {"max_num_seqs", "block_size", "enable_chunked_prefill", "outcome", OBJ}
    obj = dims[OBJ]
    assert len(obj.values) == len(study_trials)
    assert obj.ticktext[0] == "no result"
    sentinel = obj.tickvals[0]
    assert [v == sentinel for v in obj.values] == [not t.feasible for t in study_trials]
    assert sentinel < min(t.objective for t in study_trials if t.feasible)
    chunked = dims["enable_chunked_prefill"]
    assert list(chunked.ticktext) == ["False", "True", "n/a"]  # t006 has no value for it
    # The baseline sampled nothing: it is drawn at the values the engine reported (its defaults).
    assert list(dims["max_num_seqs"].values) == [256, 512, 128, 384, 1024, 2048, 64]


def test_latency_cdf_compares_promoted_with_baseline(study_trials: list[TrialResult]) -> None:
    fig = figures(study_trials, sla=SLA, objective_metric=OBJ, latency_metric=LAT,
                  promoted_trial_id="t002", baseline_trial_id="t000")["latency_cdf"]
    names = {t.name for t in fig.data}
    assert names == {"promoted (trial 2)", "baseline (trial 0)"}
    for trace in fig.data:
        assert len(trace.x) == 400
        assert list(trace.x) == sorted(trace.x) and trace.y[-1] == 1.0


def test_latency_cdf_without_records_says_so(tmp_path: Path) -> None:
    t = make_trial(tmp_path, 0, TrialOutcome.OK, tput=10, p99=10)
    t.records_path = None
    fig = figures([t], sla=SLA, objective_metric=OBJ, latency_metric=LAT, promoted_trial_id="t000",
                  baseline_trial_id=None)["latency_cdf"]
    assert not fig.data
    assert "no per-request records" in fig.layout.annotations[-1].text


def test_latency_samples_recomputes_and_filters(tmp_path: Path) -> None:
    ttft = np.array([100.0, 200.0, 300.0, 400.0])
    path = write_records(tmp_path / "r.parquet", ttft, drop_latency_columns=True, errors=1)
    t = TrialResult(trial_id="x", number=0, engine="sim", params={}, args={}, outcome=TrialOutcome.OK,
                    records_path=str(path))
    got = latency_samples(t, "ttft_ms")
    assert np.allclose(got, [200.0, 300.0, 400.0])  # the errored request is left out
    e2e = latency_samples(t, "e2el_ms")
    assert np.allclose(e2e, [200.0 + 127 * 20, 300.0 + 127 * 20, 400.0 + 127 * 20])
    assert np.allclose(latency_samples(t, "tpot_ms"), [20.0] * 3)


def test_latency_samples_keeps_only_the_capacity_point(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    a = pq.read_table(write_records(tmp_path / "a.parquet", np.array([10.0, 20.0]), load=2.0))
    b = pq.read_table(write_records(tmp_path / "b.parquet", np.array([900.0, 950.0, 990.0]), load=4.0))
    pq.write_table(pa.concat_tables([a, b]), tmp_path / "both.parquet")
    t = TrialResult(trial_id="x", number=0, engine="sim", params={}, args={}, outcome=TrialOutcome.OK,
                    capacity=2.0, records_path=str(tmp_path / "both.parquet"))
    assert latency_samples(t, "ttft_ms") == [10.0, 20.0]
