"""The Ray Tune face of the search core (tuner.search.searcher.SearchCore): suggest() asks, on_trial_complete() tells.

Kept apart from the core so that the core imports no Ray (the local executor uses it without Ray).
"""

from __future__ import annotations

import pickle
from typing import Any

import optuna
from ray.tune.search import Searcher

from tuner.search.ask_tell import TrialReport
from tuner.search.searcher import SearchCore, make_core
from tuner.search.space import Space
from tuner.spec.study import Study


class ConstrainedSearcher(Searcher):
    """Ray Tune face of `SearchCore`: suggest() -> config dict, on_trial_complete() -> tell."""

    def __init__(self, core: SearchCore) -> None:
        # No metric for Tune to enforce: failed trials report no objective, and that is their truth.
        super().__init__(metric=None, mode=None)
        self.core = core
        self._numbers: dict[str, int] = {}

    @property
    def rejected(self) -> list[dict[str, Any]]:
        return self.core.rejected

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        return True  # the space comes from the study, not from Tune's param_space

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]
        cfg = self.core.ask()
        if cfg is None:
            return Searcher.FINISHED
        self._numbers[trial_id] = cfg.number
        self.core.bind(cfg.number, trial_id)
        return cfg.to_config()

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        number = self._numbers.pop(trial_id, None)
        if number is None:
            return
        self.core.tell(number, TrialReport.from_tune(result))  # no known outcome (the trainable raised): crashed

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump({"core": self.core, "numbers": self._numbers}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        self.core, self._numbers = state["core"], state["numbers"]


def make_searcher(study: Study, space: Space, warm: list[tuple[str, dict[str, Any]]] | None = None,
                  storage: optuna.storages.BaseStorage | str | None = None, gate: Any = None) -> ConstrainedSearcher:
    """`make_core` in its Ray Tune face."""
    return ConstrainedSearcher(make_core(study, space, warm, storage, gate))
