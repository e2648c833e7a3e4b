"""The random-forest sampler (`search.algorithm: rf`) through the same SearchCore as a study: seeded,
2 trials at a time, conditional knobs, constraints, duplicates and resume from Optuna's storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

from tests.search.helpers import make_study, synthetic
from tests.search.test_levers import DFLASH
from tests.search.test_levers import study as levers_study
from tuner.search.ask_tell import Suggestion, TrialReport
from tuner.search.resume import open_storage
from tuner.search.rf_sampler import RFSampler
from tuner.search.searcher import SearchCore, make_sampler
from tuner.search.space import Space, build_space
from tuner.trial.outcome import TrialOutcome


def _run(core: SearchCore, space: Space, trials: int, score: Any = synthetic) -> list[Suggestion]:
    """`trials` launched configs, 2 at a time, as the benchmark and Ray Tune drive the core."""
    out: list[Suggestion] = []
    while len(out) < trials:
        batch = core.ask_batch(2)
        assert batch, "the sampler ran dry"
        assert len({tuple(sorted(map(str, c.args.items()))) for c in batch}) == len(batch)
        out += batch
        for cfg in batch:
            core.tell(cfg.number, score(space, cfg))
    return out


def test_rf_is_deterministic_for_a_seed_and_guides_after_its_startup() -> None:
    study = make_study(search={"algorithm": "rf", "n_startup_trials": 4})
    space = build_space(study)
    runs = []
    for _ in range(2):
        sampler = make_sampler(study, space)
        assert isinstance(sampler, RFSampler) and sampler.n_startup_trials == 4
        core = SearchCore(study, space, sampler=sampler)
        runs.append([c.args for c in _run(core, space, 16)])
        assert sampler.planned >= 6, "after 4 startup trials most trials are the forest's"
    assert runs[0] == runs[1]
    other = make_study(search={"algorithm": "rf", "n_startup_trials": 4}, seed=1)
    assert [c.args for c in _run(SearchCore(other, space), space, 16)] != runs[0]


def _spec_score(space: Space, cfg: Suggestion) -> TrialReport:
    """Best with dflash at 4-8 speculative tokens, FP8 weights and many sequences (an interaction)."""
    a = {**space.engines[cfg.engine].defaults(), **cfg.args}
    spec = a.get("speculative_config") or {}
    obj = 100.0 + a["max_num_seqs"] / 10.0 + (50.0 if a.get("quantization") == "fp8" else 0.0)
    if spec.get("method") == "dflash":
        obj += 200.0 if 4 <= spec["num_speculative_tokens"] <= 8 else 20.0
    viol = [-0.5, -0.5]
    return TrialReport(TrialOutcome.OK, objective=obj, violations=viol, latency=1.0, capacity=obj / 100)


def test_rf_respects_conditionals_and_constraints_on_the_levers_space() -> None:
    st = levers_study(allow=["fp8_weights", "fp8_kv_cache", "speculative_decoding"], speculative=DFLASH,
                      seed=5, search={"algorithm": "rf", "n_startup_trials": 4})
    space = build_space(st)
    core = SearchCore(st, space)
    cfgs = _run(core, space, 24, _spec_score)
    sp = space.engines["sim"]
    for t in core.optuna.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        method = t.params.get("sim.speculative_config.method", "none")
        assert ("sim.speculative_config.num_speculative_tokens" in t.params) == (method != "none")
        assert ("sim.speculative_config.prompt_lookup_min" in t.params) == (method == "ngram")
        chunked = t.params.get("sim.enable_chunked_prefill", True)
        assert ("sim.max_num_partial_prefills" in t.params) == chunked
    for c in cfgs[1:]:  # the baseline launches no flag
        spec = c.args.get("speculative_config")
        width = 1 + (spec["num_speculative_tokens"] if spec else 0)
        assert c.args["max_num_batched_tokens"] >= c.args["max_num_seqs"] * width
        assert sp.apply_constraints(c.params)[0] == c.args  # launched as repaired: nothing left to repair
    best = core.best()
    assert best is not None and best["objective"] >= 300.0, "the forest found dflash at 4-8 tokens"


def test_rf_resumes_from_optuna_storage_without_relaunching(tmp_path: Path) -> None:
    study = make_study(name="rf-stored", search={"algorithm": "rf", "n_startup_trials": 4})
    space = build_space(study)
    first = SearchCore(study, space, storage=open_storage(tmp_path, study.name, fresh=True))
    before = _run(first, space, 10)
    done = [_result(c, synthetic(space, c)) for c in before]
    again = SearchCore(study, space, storage=open_storage(tmp_path, study.name, fresh=False))
    assert isinstance(again.optuna.sampler, RFSampler)
    assert again.resume(done) == []
    after = _run(again, space, 8)
    assert isinstance(again.optuna.sampler, RFSampler) and again.optuna.sampler.planned >= 4
    keys = [tuple(sorted(map(str, c.args.items()))) for c in before + after]
    assert len(set(keys)) == len(keys), "a resumed search never relaunches a config"
    assert [c.number for c in after] == list(range(10, 18))


def _result(cfg: Suggestion, res: TrialReport) -> Any:
    from tuner.trial.result import TrialResult

    return TrialResult(trial_id=f"tune-{cfg.number}", number=cfg.number, engine=cfg.engine, params=cfg.params,
                       args=cfg.args, outcome=res.outcome, objective=res.objective, capacity=res.capacity,
                       reason=res.reason, baseline=cfg.baseline,
                       metrics={"p99_ttft_ms": 500.0, "p99_e2el_ms": 1000.0} if res.objective else {})


def test_rf_distinct_filter_runs_through_the_core() -> None:
    """`distinct` (the benchmark's rf-d) only narrows the candidates: the search still runs and is guided."""
    study = make_study(search={"algorithm": "rf", "n_startup_trials": 4})
    space = build_space(study)
    sampler = RFSampler(seed=0, space=space, n_startup_trials=4, distinct=True)
    cfgs = _run(SearchCore(study, space, sampler=sampler), space, 16)
    assert sampler.planned >= 6 and len(cfgs) == 16
