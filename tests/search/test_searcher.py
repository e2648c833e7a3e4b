"""The constrained searcher: baseline first, SLA constraints attached per trial, outcomes mapped, seeds."""

from __future__ import annotations

import optuna
import pytest

from tests.search.helpers import SMALL_LEVERS, core_for, make_study, synthetic
from tuner.search.ask_tell import TrialReport
from tuner.search.tune_searcher import make_searcher
from tuner.trial.outcome import TrialOutcome


def test_baseline_is_trial_zero_and_runs_engine_defaults() -> None:
    study = make_study(search_space={"fixed": {"enforce_eager": False}})
    core, _ = core_for(study)
    first = core.ask()
    assert first is not None
    assert first.number == 0 and first.baseline is True
    assert first.params == {} and first.args == {"enforce_eager": False}
    second = core.ask()
    assert second is not None and second.number == 1 and not second.baseline and second.params


def test_joint_study_has_one_baseline_per_engine_first() -> None:
    core, _ = core_for(make_study(engine=["vllm", "sglang"]))
    firsts = [core.ask() for _ in range(2)]
    assert [c.engine for c in firsts] == ["vllm", "sglang"]  # type: ignore[index]
    assert all(c.baseline and c.params == {} for c in firsts)  # type: ignore[index]
    assert [c.number for c in firsts] == [0, 1]  # type: ignore[index]


def test_ask_batch_numbers_configs_in_launch_order_and_stops_when_the_space_is_spent() -> None:
    core, _ = core_for(make_study(engine=["vllm", "sglang"]))
    batch = core.ask_batch(3)
    assert [c.number for c in batch] == [0, 1, 2]
    assert [c.baseline for c in batch] == [True, True, False]
    grid, space = core_for(make_study(search={"algorithm": "grid", "baseline_first": False},
                                      search_space={"overrides": {"max_num_batched_tokens": {"low": 8192, "high": 8192},
                                                                  "block_size": {"choices": [16]},
                                                                  "scheduling_policy": {"choices": ["fcfs"]}},
                                                    "exclude": SMALL_LEVERS}))
    spent = grid.ask_batch(1000)
    assert 0 < len(spent) <= len(space.engines["vllm"].grid(3)) and grid.ask_batch(5) == []


@pytest.mark.parametrize("algorithm", ["random", "tpe-coord"])
def test_joint_study_samples_both_engines_with_their_own_parameter_names(algorithm: str) -> None:
    study = make_study(engine=["vllm", "sglang"], search={"algorithm": algorithm, "baseline_first": False,
                                                          "n_startup_trials": 6})
    core, space = core_for(study)
    seen: dict[str, int] = {}
    for _ in range(30):
        cfg = core.ask()
        assert cfg is not None
        engine = cfg.engine
        seen[engine] = seen.get(engine, 0) + 1
        assert set(cfg.params) <= set(space.engines[engine].params)
        core.tell(cfg.number, synthetic(space, cfg))
    assert seen.get("vllm", 0) >= 5 and seen.get("sglang", 0) >= 5, seen
    for t in core.optuna.trials:
        engine = t.params["engine"]
        assert all(k == "engine" or k.startswith(f"{engine}.") for k in t.params), t.params


def test_sla_violations_are_attached_as_optuna_constraints() -> None:
    study = make_study(search={"baseline_first": False})
    core, _ = core_for(study)
    outcomes = [
        TrialReport(TrialOutcome.OK, objective=900.0, violations=[-0.2, -0.5]),
        TrialReport(TrialOutcome.SLA_VIOLATED, objective=300.0, violations=[0.4, -0.1]),
        TrialReport.failed(TrialOutcome.OOM, "CUDA out of memory"),
        TrialReport(TrialOutcome.TIMEOUT),
    ]
    for res in outcomes:
        cfg = core.ask()
        assert cfg is not None
        core.tell(cfg.number, res)
    launched = [t for t in core.optuna.trials if "servetune.number" in t.user_attrs]
    ok, bad, oom, hung = launched[:4]
    assert ok.state == optuna.trial.TrialState.COMPLETE and ok.value == 900.0
    assert ok.constraints == {"sla.p99_ttft_ms": -0.2, "sla.p99_e2el_ms": -0.5}
    assert bad.state == optuna.trial.TrialState.COMPLETE and bad.constraints["sla.p99_ttft_ms"] == 0.4
    assert oom.state == optuna.trial.TrialState.FAIL and oom.value is None  # never a fake zero
    assert hung.state == optuna.trial.TrialState.FAIL
    assert core.incumbent() == 900.0
    best = core.best()
    assert best is not None and best["objective"] == 900.0


def test_same_seed_same_configs_and_other_seed_differs() -> None:
    def run(seed: int) -> list[dict]:
        core, space = core_for(make_study(seed=seed))
        out = []
        for _ in range(12):
            cfg = core.ask()
            assert cfg is not None
            out.append(cfg.args)
            core.tell(cfg.number, synthetic(space, cfg))
        return out

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_reject_constraints_are_never_launched_and_listed() -> None:
    study = make_study(search={"algorithm": "random", "baseline_first": False},
                       search_space={"constraints": [{"require": "max_num_seqs <= 128", "action": "reject"}]})
    core, space = core_for(study)
    for _ in range(15):
        cfg = core.ask()
        assert cfg is not None
        assert cfg.args["max_num_seqs"] <= 128
        core.tell(cfg.number, synthetic(space, cfg))
    assert core.rejected, "the random sampler must have hit max_num_seqs > 128 at least once"
    assert all(r["reason"].startswith("constraint: max_num_seqs <= 128") for r in core.rejected)
    assert all(r["params"]["max_num_seqs"] > 128 for r in core.rejected)


def test_repairs_are_reported_in_notes() -> None:
    core, _ = core_for(make_study(search={"algorithm": "random", "baseline_first": False}))
    notes = []
    for _ in range(40):
        cfg = core.ask()
        assert cfg is not None
        assert cfg.args["max_num_seqs"] <= cfg.args["max_num_batched_tokens"]
        if not cfg.args["enable_chunked_prefill"]:
            assert cfg.args["max_num_batched_tokens"] >= 8192
        notes += cfg.notes
        core.tell(cfg.number, TrialReport(TrialOutcome.CRASHED))
    assert any(n.startswith("repaired max_num_batched_tokens") for n in notes)


def test_multi_objective_mode_tells_throughput_and_latency() -> None:
    study = make_study(objective={"mode": "multi"}, search={"algorithm": "nsga2", "baseline_first": False})
    core, space = core_for(study)
    assert [d.name for d in core.optuna.directions] == ["MAXIMIZE", "MINIMIZE"]
    for _ in range(10):
        cfg = core.ask()
        assert cfg is not None
        core.tell(cfg.number, synthetic(space, cfg))
    done = [t for t in core.optuna.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert done and all(len(t.values) == 2 and t.constraints for t in done)
    assert core.optuna.best_trials  # a Pareto front exists


def test_grid_algorithm_walks_the_grid_then_finishes() -> None:
    study = make_study(search={"algorithm": "grid", "baseline_first": False},
                       search_space={"overrides": {"max_num_batched_tokens": {"low": 8192, "high": 8192},
                                                   "block_size": {"choices": [16]},
                                                   "scheduling_policy": {"choices": ["fcfs"]}},
                                     "exclude": SMALL_LEVERS})
    core, space = core_for(study)
    expected = len(space.engines["vllm"].grid(3))
    launched = []
    while (cfg := core.ask()) is not None:
        launched.append(cfg.args)
        core.tell(cfg.number, synthetic(space, cfg))
    assert 0 < len(launched) <= expected <= 40
    assert len({tuple(sorted(a.items())) for a in launched}) == len(launched), "no duplicates"


def test_duplicates_are_not_relaunched() -> None:
    core, space = core_for(make_study(search={"algorithm": "random", "baseline_first": False},
                                      search_space={"exclude": SMALL_LEVERS}))
    params = {"vllm.max_num_seqs": 64, "vllm.max_num_batched_tokens": 4096, "vllm.gpu_memory_utilization": 0.9,
              "vllm.block_size": 16, "vllm.enable_chunked_prefill": True, "vllm.max_num_partial_prefills": 1,
              "vllm.scheduling_policy": "fcfs"}
    core.optuna.enqueue_trial(params)
    first = core.ask()
    assert first is not None and first.params["max_num_seqs"] == 64
    core.tell(first.number, synthetic(space, first))
    core.optuna.enqueue_trial(params)
    second = core.ask()
    assert second is not None and second.args != first.args
    assert core.duplicates == 1


@pytest.mark.parametrize("algorithm", ["tpe-local", "tpe-coord", "tpe", "random", "nsga2"])
def test_ray_searcher_face(algorithm: str) -> None:
    searcher = make_searcher(make_study(search={"algorithm": algorithm}), _space())
    assert searcher.set_search_properties("objective", "max", {})
    cfg = searcher.suggest("t0")
    assert isinstance(cfg, dict) and cfg["baseline"] and cfg["number"] == 0
    searcher.on_trial_complete("t0", None, error=True)  # an actor that died: FAIL, not a crash of the searcher
    assert searcher.core.history[0]["outcome"] == "crashed"


def _space():
    from tuner.search.space import build_space

    return build_space(make_study())


def test_sla_violated_without_objective_reads_the_trials_own_metrics() -> None:
    core, _ = core_for(make_study(search={"baseline_first": False}))
    cfg = core.ask()
    assert cfg is not None
    core.tell(cfg.number, TrialReport.from_tune({"outcome": "sla_violated", "objective": None, "violations": [0.3, -0.1],
                                                 "metrics": {"output_throughput": 123.0}}))
    t = core.optuna.trials[-1]
    assert t.state == optuna.trial.TrialState.COMPLETE and t.value == 123.0 and t.constraints["sla.p99_ttft_ms"] == 0.3


def test_warm_start_configs_run_right_after_the_baseline() -> None:
    core, _ = core_for(make_study())
    core.warm_start([("vllm", {"max_num_seqs": 77, "max_num_batched_tokens": 4096, "gpu_memory_utilization": 0.9,
                               "block_size": 32, "enable_chunked_prefill": True, "max_num_partial_prefills": 2,
                               "scheduling_policy": "fcfs"})])
    first, second = core.ask(), core.ask()
    assert first is not None and first.baseline
    assert second is not None and second.params["max_num_seqs"] == 77 and second.params["block_size"] == 32
