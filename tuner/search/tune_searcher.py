"""The Ray Tune face of the search core (tuner.search.searcher.SearchCore): suggest() asks, on_trial_complete() tells.

Kept apart from the core so that the core imports no Ray (the local executor uses it without Ray).
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import optuna
from ray.tune.search import Searcher

from tuner.common.errors import disk_full_in
from tuner.search.ask_tell import TrialReport
from tuner.search.searcher import SearchCore, make_core
from tuner.search.signals import Interrupt
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
        if Interrupt.failure is not None:
            return Searcher.FINISHED
        with _disk_full_ends_search():
            cfg = self.core.ask()
        if Interrupt.failure is not None or cfg is None:
            return Searcher.FINISHED
        self._numbers[trial_id] = cfg.number
        self.core.bind(cfg.number, trial_id)
        return cfg.to_config()

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        number = self._numbers.pop(trial_id, None)
        if number is None:
            return
        with _disk_full_ends_search():
            self.core.tell(number, TrialReport.from_tune(result))  # no known outcome (the trainable raised): crashed

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump({"core": self.core, "numbers": self._numbers}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        self.core, self._numbers = state["core"], state["numbers"]


@contextmanager
def _disk_full_ends_search() -> Iterator[None]:
    """A full disk under Optuna's storage ends the search like one under trials.parquet (the recorder):
    the fault is kept for the driver to raise after Tune stops, instead of escaping into Tune, which would
    log its traceback before the driver's one-line error."""
    try:
        yield
    except Exception as exc:
        if disk_full_in(exc) is None:
            raise
        Interrupt.failure = Interrupt.failure or exc  # the driver raises it; the CLI names the folder
        logging.getLogger("ray.tune").setLevel(logging.CRITICAL)  # its own state writes fail the same way


def make_searcher(study: Study, space: Space, warm: list[tuple[str, dict[str, Any]]] | None = None,
                  storage: optuna.storages.BaseStorage | str | None = None, gate: Any = None) -> ConstrainedSearcher:
    """`make_core` in its Ray Tune face."""
    return ConstrainedSearcher(make_core(study, space, warm, storage, gate))
