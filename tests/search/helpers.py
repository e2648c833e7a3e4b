"""Small studies and a synthetic, deterministic evaluator with an OOM region (no engine needed)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import optuna

from tuner.search.ask_tell import Suggestion, TrialReport
from tuner.search.searcher import SearchCore
from tuner.search.space import Space, build_space
from tuner.spec.load import validate
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome

# knobs a test's enqueued or synthetic configs ignore (the smaller levers and the layout of issue 15)
SMALL_LEVERS = ["enable_prefix_caching", "long_prefill_token_threshold", "max_cudagraph_capture_size",
                "stream_interval", "tensor_parallel_size", "data_parallel_size"]


def make_study(**changes: Any) -> Study:
    data: dict[str, Any] = {
        "name": "t", "seed": 0, "engine": "vllm", "model": {"name": "m", "max_model_len": 8192},
        "workload": {"profile": "dynamic"}, "sla": ["p99_ttft_ms <= 1000", "p99_e2el_ms <= 20000"],
        "search": {"algorithm": "tpe", "n_startup_trials": 4},
    }
    data.update(changes)
    return validate(Study, data, "study")


def core_for(study: Study) -> tuple[SearchCore, Space]:
    space = build_space(study)
    return SearchCore(study, space), space


def synthetic(space: Space, cfg: Suggestion) -> TrialReport:
    """A made-up response surface: OOM when memory knobs are all high; SLA breaks at small batches."""
    sp = space.engines[cfg.engine]
    a = {**sp.defaults(), **cfg.args}
    if cfg.engine == "sglang":
        mem, seqs = a["mem_fraction_static"], a.get("max_running_requests") or 256
        mem_hi = 0.9
    else:
        mem, seqs = a["gpu_memory_utilization"], a["max_num_seqs"]
        mem_hi = 0.9
    if mem >= mem_hi and seqs >= 128:
        return TrialReport.failed(TrialOutcome.OOM, "CUDA out of memory")
    obj = 1000.0 * math.log(seqs) * mem
    ttft = 4000.0 / math.log(seqs)
    viol = [(ttft - 1000.0) / 1000.0, -0.5]
    outcome = TrialOutcome.OK if max(viol) <= 0 else TrialOutcome.SLA_VIOLATED
    return TrialReport(outcome, objective=obj, violations=list(viol), latency=ttft, capacity=obj / 100)


def mixed_knobs(trial: optuna.Trial) -> dict[str, Any]:
    """One knob of each kind a study space has (categorical, log int, stepped float, int, bool): the
    samplers' own tests ask Optuna for these directly."""
    return {"c": trial.suggest_categorical("c", ["a", "b", "c"]),
            "n": trial.suggest_int("n", 16, 1024, log=True),
            "f": trial.suggest_float("f", 0.8, 0.97, step=0.01),
            "p": trial.suggest_int("p", 1, 4),
            "b": trial.suggest_categorical("b", [True, False])}


def lever_value(params: dict[str, Any]) -> float:
    """The objective of `mixed_knobs` configs in the samplers' move tests: c = "b" doubles it, b = False triples it."""
    return (2.0 if params["c"] == "b" else 1.0) * (3.0 if params["b"] is False else 1.0)


def tell_lever_start(study: optuna.Study) -> None:
    """Four told SLA-feasible trials at `lever_value`; the best (b = False) has c = "a", so c -> "b" is the lever
    that pays from it."""
    for c, b in [("a", True), ("b", True), ("c", True), ("a", False)]:
        study.enqueue_trial({"c": c, "n": 64, "f": 0.9, "p": 2, "b": b})
        t = study.ask()
        t.set_constraint("sla", -0.1)
        study.tell(t, lever_value(mixed_knobs(t)))


def tell_moves(sampler: Any, n: int, objective: Callable[[dict[str, Any]], float] = lever_value
               ) -> list[tuple[dict[str, Any], tuple[str, Any] | None]]:
    """`tell_lever_start`, then `n` guided trials of `sampler` told SLA-feasible at `objective`: each trial's params
    and the move the sampler planned for it (None for a draw)."""
    study = optuna.create_study(direction="maximize", sampler=sampler)
    tell_lever_start(study)
    out = []
    for _ in range(n):
        trial = study.ask()
        params = mixed_knobs(trial)
        out.append((params, sampler.moves.get(trial.number)))
        trial.set_constraint("sla", -0.1)
        study.tell(trial, objective(params))
    return out


def ask_move(sampler: Any, told: list[optuna.trial.FrozenTrial],
             dists: dict[str, optuna.distributions.BaseDistribution]) -> tuple[str, Any] | None:
    """The single-knob move a `tpe-coord` sampler records for the next trial of a study told `told`, whose knobs are
    asked over `dists` (None: that trial was not a move)."""
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for t in told:
        study.add_trial(t)
    trial = study.ask()
    for name, d in dists.items():
        if isinstance(d, optuna.distributions.CategoricalDistribution):
            trial.suggest_categorical(name, list(d.choices))
        else:
            assert isinstance(d, optuna.distributions.IntDistribution)
            trial.suggest_int(name, d.low, d.high, log=d.log)
    move: tuple[str, Any] | None = sampler.moves.get(trial.number)
    return move
