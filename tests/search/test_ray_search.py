"""The searcher inside a real Ray Tune run: baseline first, results told back, failures learned."""

from __future__ import annotations

from typing import Any

import pytest
import ray
from ray import tune

from tests.search.helpers import make_study, synthetic
from tuner.search.ask_tell import Suggestion
from tuner.search.space import build_space
from tuner.search.tune_searcher import make_searcher

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def test_tune_run_with_the_constrained_searcher(local_ray: None, tmp_path: Any) -> None:
    study = make_study(search={"algorithm": "tpe", "n_startup_trials": 3})
    space = build_space(study)

    def trainable(config: dict[str, Any]) -> None:
        tune.report(synthetic(space, Suggestion.from_config(config)).to_tune())

    searcher = make_searcher(study, space)
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=10, max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="s", verbose=0),
    )
    grid = tuner.fit()
    configs = sorted((r.config for r in grid), key=lambda c: c["number"])
    assert len(configs) == 10
    assert configs[0]["baseline"] and configs[0]["number"] == 0 and configs[0]["params"] == {}
    assert [c["number"] for c in configs] == list(range(10))
    # the searcher object given to Tune is the one that heard every result
    assert len(searcher.core.history) == 10
    assert {h["outcome"] for h in searcher.core.history} <= {"ok", "sla_violated", "oom"}
    told = [t for t in searcher.core.optuna.trials if t.state.name in ("COMPLETE", "FAIL")
            and "servetune.number" in t.user_attrs]
    assert len(told) >= 9  # the baseline and every sampled config (duplicates/rejections excluded)
    ooms = [h for h in searcher.core.history if h["outcome"] == "oom"]
    keys = [tuple(sorted(h["args"].items())) for h in ooms]
    assert len(keys) == len(set(keys)), "an OOM config was launched twice"
