"""Simulator evaluations (the benchmark's oracle) and pre-screening for real-engine studies."""

from __future__ import annotations

from tests.search.helpers import make_study
from tuner.search.prescreen import prescreen, simulate
from tuner.search.space import build_space
from tuner.trial.fidelity import RungStop
from tuner.trial.outcome import TrialOutcome

QUICK = {"low": 1, "high": 8, "max_points": 3, "requests_per_point": 40}
MODEL = {"name": "Qwen/Qwen3-8B", "max_model_len": 8192}


def test_simulate_maps_start_failures_and_runs() -> None:
    study = make_study(engine="sim", model=MODEL, capacity=QUICK)
    bad = simulate(study, "vllm", {"gpu_memory_utilization": 0.1})
    assert bad.outcome in (TrialOutcome.START_FAILED, TrialOutcome.OOM) and bad.objective is None and bad.reason
    good = simulate(study, "vllm", {})
    assert good.outcome.ran
    assert good.objective is not None and good.objective > 0
    assert len(good.violations) == 2 and good.points == len(good.load_points) >= 1


def test_rung_stop_inside_simulate_ends_the_capacity_search_early() -> None:
    study = make_study(engine="sim", model=MODEL, capacity={**QUICK, "max_points": 5, "high": 64},
                       sla=["p99_ttft_ms <= 1000"])
    full = simulate(study, "vllm", {"max_num_seqs": 16, "max_num_batched_tokens": 2048})
    assert full.outcome is TrialOutcome.OK and full.points >= 2 and full.objective is not None
    huge = full.objective * 10  # an incumbent this config cannot reach
    stopped = simulate(study, "vllm", {"max_num_seqs": 16, "max_num_batched_tokens": 2048},
                       on_point=RungStop(incumbent=huge, sla=study.sla))
    assert stopped.points < full.points
    assert stopped.early_stopped or stopped.outcome is TrialOutcome.SLA_VIOLATED


def test_prescreen_warm_starts_a_real_engine_study() -> None:
    study = make_study(engine="vllm", model=MODEL, capacity=QUICK,
                       search={"prescreen": True, "n_startup_trials": 2})
    space = build_space(study)
    picks = prescreen(study, trials=4, top_k=2)
    assert 1 <= len(picks) <= 2
    assert all(e == "vllm" and set(p) <= set(space.engines["vllm"].params) for e, p in picks)
