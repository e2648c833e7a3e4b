"""A sampler that decides a whole config before the trial and hands it to Optuna knob by knob.

Why: the samplers that pick a config as a whole (a neighbour of the incumbent, a surrogate's best
candidate) must still go through Optuna's ask/tell, so that storage, resume and dashboards see a normal
trial. Subclasses plan in `before_trial` (`self._plans[trial.number] = {...}`); a knob the plan lacks,
or a planned value outside the trial's distribution, comes from the `fallback` sampler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState


class PlannedSampler(BaseSampler):
    """Hands out `_plans[trial.number]`; asks `fallback` for everything else; seeded `_rng` for planning."""

    def __init__(self, fallback: BaseSampler, seed: int | None) -> None:
        self._fallback = fallback
        self._rng = np.random.RandomState(seed)
        self._plans: dict[int, dict[str, Any]] = {}  # trial number -> planned values

    def reseed_rng(self) -> None:
        self._fallback.reseed_rng()
        self._rng.seed()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        plan = self._plans.get(trial.number)
        if plan is not None and param_name in plan and param_distribution._contains(
                param_distribution.to_internal_repr(plan[param_name])):
            return plan[param_name]
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._plans.pop(trial.number, None)
        self._fallback.after_trial(study, trial, state, values)
